/**
 * Order-preserving key encoding: `encodeKey(values)` gives bytes whose `memcmp` order equals
 * the value order of `compareValues`, element by element for compound keys. Postgres indexes
 * these bytes with a plain btree on `bytea`. Layout (see README.md):
 *
 *   key     = value*                       (no terminator: every value is self-delimiting)
 *   value   = tag payload                  tag = MongoDB canonical type (MinKey 0x01)
 *   string  = escaped bytes, 0x00 0x00     (0x00 inside becomes 0x00 0xFF)
 *   object  = (tag name payload)* 0x00     (name is an escaped string)
 *   array   = (tag payload)* 0x00
 *
 * No encoding is a proper prefix of a different one, so concatenation preserves tuple order.
 */
import { Binary, BSONRegExp, type Long, MaxKey, MinKey, ObjectId, Timestamp } from 'bson';
import { TesseraError } from '../errors.js';
import { binaryBytes, numericValueOf, regexParts, typeBracketOf } from '../values/value.js';
import type { TypeBracket, Value, ValueArray, ValueObject } from '../values/value.js';
import { decodeUtf8, encodeUtf8 } from '../values/utf8.js';
import { ByteWriter, bytesToLatin1 } from './byte-writer.js';
import { readNumber, writeLong, writeNumber } from './number-encoding.js';

/** Tag bytes: MongoDB's canonical type numbers, with MinKey moved from -1 to 1 (0 ends objects). */
const TAG: Record<TypeBracket, number> = {
  minKey: 0x01,
  null: 0x05,
  number: 0x0a,
  string: 0x0f,
  object: 0x14,
  array: 0x19,
  binData: 0x1e,
  objectId: 0x23,
  bool: 0x28,
  date: 0x2d,
  timestamp: 0x2f,
  regex: 0x32,
  maxKey: 0x7f,
};
const END = 0x00;
const BIAS_64 = 1n << 63n;

/** Bytes above every encoded key (each starts with a type tag, maxKey's the highest): the exclusive end of the whole key space. */
export const KEY_SPACE_END: Uint8Array = Uint8Array.of(TAG.maxKey + 1);

/**
 * Encodes a key (one value per shard key field, in pattern order) into order-preserving bytes.
 * Returns a new byte array. Throws `BAD_VALUE` for unsupported types (see `typeBracketOf`).
 */
export function encodeKey(values: readonly Value[]): Uint8Array {
  const out = scratchWriter();
  for (const value of values) writeValue(out, value);
  return out.toBytes();
}

/**
 * Encodes a key like `encodeKey` but returns a binary string (one char per byte, 0-255), which
 * compares with `<` exactly as the bytes compare with memcmp, and is compact in memory.
 * Throws as `encodeKey`.
 */
export function encodeKeyToBinaryString(values: readonly Value[]): string {
  const out = scratchWriter();
  for (const value of values) writeValue(out, value);
  return out.toBinaryString();
}

/** Encoded key bytes `bytes[0, length)` in a shared buffer (see `encodeKeyTransient`). */
export interface TransientKey {
  readonly bytes: Uint8Array;
  readonly length: number;
}

/**
 * Encodes a key like `encodeKey` into a shared buffer, without copying: the result is valid
 * only until the next call of any encode function of this module. For hot lookups that only
 * compare the bytes. Throws as `encodeKey`.
 */
export function encodeKeyTransient(values: readonly Value[]): TransientKey {
  const out = scratchWriter();
  for (let i = 0; i < values.length; i++) writeValue(out, values[i] as Value);
  return { bytes: out.buffer(), length: out.length };
}

/**
 * One writer reused by every encode (encoding is synchronous and never re-enters itself), so
 * a lookup allocates nothing but its result.
 */
const SCRATCH = new ByteWriter(256);

function scratchWriter(): ByteWriter {
  SCRATCH.reset();
  return SCRATCH;
}

/** Converts encoded key bytes into the equivalent binary string. Throws nothing. */
export function bytesToBinaryString(bytes: Uint8Array): string {
  return bytesToLatin1(bytes);
}

/** Converts a binary string (chars 0-255) back into bytes. Throws nothing (higher chars are truncated to 8 bits). */
export function binaryStringToBytes(text: string): Uint8Array {
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i) & 0xff;
  return bytes;
}

/**
 * Decodes bytes made by `encodeKey` back into the key's values (for display and tests).
 * Equal values of different numeric types encode alike, so numbers come back as JS numbers,
 * or `Long` for integers beyond 2^53; every value compares equal to what was encoded.
 * Throws `BAD_VALUE` on bytes that no key encodes to.
 */
export function decodeKey(bytes: Uint8Array): Value[] {
  const reader = { bytes, offset: 0 };
  const values: Value[] = [];
  while (reader.offset < bytes.length) values.push(readValue(reader, readByte(reader)));
  return values;
}

/** Returns the lowercase hex form of encoded key bytes (for logs and SQL literals). Throws nothing. */
export function encodedKeyToHex(bytes: Uint8Array): string {
  let hex = '';
  for (const b of bytes) hex += b.toString(16).padStart(2, '0');
  return hex;
}

/** Parses the hex form of encoded key bytes. Throws `BAD_VALUE` when `hex` is not even-length hex. */
export function encodedKeyFromHex(hex: string): Uint8Array {
  if (hex.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(hex)) {
    throw new TesseraError('BAD_VALUE', 'An encoded key in hex must have an even number of hex digits.');
  }
  const bytes = new Uint8Array(hex.length / 2);
  for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return bytes;
}

function writeValue(out: ByteWriter, value: Value): void {
  const bracket = typeBracketOf(value);
  out.byte(TAG[bracket]);
  writePayload(out, bracket, value);
}

function writePayload(out: ByteWriter, bracket: TypeBracket, value: Value): void {
  switch (bracket) {
    case 'minKey':
    case 'maxKey':
    case 'null':
      return;
    case 'number':
      if ((value as { _bsontype?: unknown })._bsontype === 'Long') return writeLong(out, value as Long);
      return writeNumber(out, numericValueOf(value));
    case 'string':
      return writeString(out, value as string);
    case 'bool':
      return out.byte(value === true ? 1 : 0);
    case 'date':
      return out.uint64BE(BigInt((value as Date).getTime()) + BIAS_64);
    case 'objectId':
      return out.raw((value as ObjectId).id);
    case 'binData': {
      const bytes = binaryBytes(value as Binary);
      out.uint32BE(bytes.length);
      out.byte((value as Binary).sub_type);
      return out.raw(bytes);
    }
    case 'timestamp':
      out.uint32BE((value as Timestamp).t);
      return out.uint32BE((value as Timestamp).i);
    case 'regex': {
      const { pattern, flags } = regexParts(value as RegExp);
      writeString(out, pattern);
      return writeString(out, flags);
    }
    case 'array':
      for (const element of value as ValueArray) writeValue(out, element);
      return out.byte(END);
    case 'object':
      for (const [name, field] of Object.entries(value as ValueObject)) {
        const fieldBracket = typeBracketOf(field);
        out.byte(TAG[fieldBracket]);
        writeString(out, name);
        writePayload(out, fieldBracket, field);
      }
      return out.byte(END);
  }
}

function writeString(out: ByteWriter, text: string): void {
  // Escaping 0x00 as 0x00 0xFF and terminating with 0x00 0x00 keeps byte order equal to string
  // order (a prefix sorts first) with embedded NULs, and no string is a prefix of another's encoding.
  let i = 0;
  for (; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0x80) break; // ASCII fast path; the rest goes through the UTF-8 encoder
    out.byte(unit);
    if (unit === 0) out.byte(0xff);
  }
  if (i < text.length) {
    for (const b of encodeUtf8(text.slice(i))) {
      out.byte(b);
      if (b === 0) out.byte(0xff);
    }
  }
  out.byte(0);
  out.byte(0);
}

interface Reader {
  readonly bytes: Uint8Array;
  offset: number;
}

function readByte(reader: Reader): number {
  const b = reader.bytes[reader.offset];
  if (b === undefined) throw corrupt(reader, 'it ends early');
  reader.offset++;
  return b;
}

function readBytes(reader: Reader, length: number): Uint8Array {
  if (reader.offset + length > reader.bytes.length) throw corrupt(reader, 'it ends early');
  const slice = reader.bytes.slice(reader.offset, reader.offset + length);
  reader.offset += length;
  return slice;
}

function readUint32(reader: Reader): number {
  const b = readBytes(reader, 4);
  return new DataView(b.buffer).getUint32(0, false);
}

function readValue(reader: Reader, tag: number): Value {
  switch (tag) {
    case TAG.minKey:
      return new MinKey();
    case TAG.maxKey:
      return new MaxKey();
    case TAG.null:
      return null;
    case TAG.number: {
      const { value, next } = readNumber(reader.bytes, reader.offset);
      reader.offset = next;
      return value;
    }
    case TAG.string:
      return readString(reader);
    case TAG.bool:
      return readByte(reader) === 1;
    case TAG.date: {
      const b = readBytes(reader, 8);
      return new Date(Number(new DataView(b.buffer).getBigUint64(0, false) - BIAS_64));
    }
    case TAG.objectId:
      return new ObjectId(readBytes(reader, 12));
    case TAG.binData: {
      const length = readUint32(reader);
      const subType = readByte(reader);
      return new Binary(readBytes(reader, length), subType);
    }
    case TAG.timestamp: {
      const t = readUint32(reader);
      const i = readUint32(reader);
      return new Timestamp({ t, i });
    }
    case TAG.regex: {
      const pattern = readString(reader);
      return new BSONRegExp(pattern, readString(reader));
    }
    case TAG.array: {
      const values: Value[] = [];
      for (let t = readByte(reader); t !== END; t = readByte(reader)) values.push(readValue(reader, t));
      return values;
    }
    case TAG.object: {
      const fields: Record<string, Value> = {};
      for (let t = readByte(reader); t !== END; t = readByte(reader)) {
        const name = readString(reader);
        // defineProperty, not assignment, so a field named "__proto__" stays a field.
        Object.defineProperty(fields, name, { value: readValue(reader, t), enumerable: true, writable: true, configurable: true });
      }
      return fields;
    }
    default:
      throw corrupt(reader, `tag 0x${tag.toString(16)} is unknown`);
  }
}

function readString(reader: Reader): string {
  const bytes: number[] = [];
  for (;;) {
    const b = readByte(reader);
    if (b !== 0) {
      bytes.push(b);
      continue;
    }
    const escape = readByte(reader);
    if (escape === 0) break;
    if (escape !== 0xff) throw corrupt(reader, 'a string has an invalid escape');
    bytes.push(0);
  }
  return decodeUtf8(Uint8Array.from(bytes));
}

function corrupt(reader: Reader, why: string): TesseraError {
  return new TesseraError('BAD_VALUE', `Cannot decode key bytes at offset ${reader.offset}: ${why}.`, {
    details: { offset: reader.offset },
  });
}
