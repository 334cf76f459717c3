/**
 * Hashed shard key values, exactly as MongoDB's `BSONElementHasher::hash64(element, seed 0)`:
 *
 *   MD5( int32LE(seed) , element )     element = int32LE(canonicalType) [name NUL] value
 *
 * where numbers (int, long, double) contribute their value squashed to int64
 * (`safeNumberLongForHash`: truncate toward zero, NaN -> 0, saturate beyond int64) as int64LE;
 * other leaf types their raw BSON value bytes; objects and arrays each element with its field
 * name (array names are "0", "1", ...), then the end-of-object element (canonical type 0, no
 * name). The hash is the digest's first 8 bytes read as a little-endian signed int64.
 * Known outputs from MongoDB's hasher_test.cpp are this module's test vectors.
 */
import { Long } from 'bson';
import type { Binary, ObjectId, Timestamp } from 'bson';
import { ByteWriter } from '../keys/byte-writer.js';
import { binaryBytes, CANONICAL_TYPE, numericValueOf, regexParts, typeBracketOf } from '../values/value.js';
import type { Value, ValueArray, ValueObject } from '../values/value.js';
import { encodeUtf8 } from '../values/utf8.js';
import { md5Words } from './md5.js';

/** The seed MongoDB uses for hashed indexes and hashed shard keys. */
export const HASHED_INDEX_SEED = 0;

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const END_OF_OBJECT_TYPE = 0;

/**
 * Returns MongoDB's 64-bit hash of `value` (seed 0) as a `Long`: the value a hashed shard key
 * field holds. Equal numbers of any width hash alike, and doubles hash as their truncation.
 * Throws `BAD_VALUE` for unsupported types (see `typeBracketOf`).
 */
export function hashShardKeyValue(value: Value, seed: number = HASHED_INDEX_SEED): Long {
  // The digest's first two little-endian words are the hash's halves: no bigint on the way.
  const words = hashWords(value, seed);
  return Long.fromBits(words[0]! | 0, words[1]! | 0);
}

/** Returns MongoDB's 64-bit hash of `value` with `seed` as a `bigint`. Throws as `hashShardKeyValue`. */
export function hash64(value: Value, seed: number = HASHED_INDEX_SEED): bigint {
  const words = hashWords(value, seed);
  return BigInt.asIntN(64, (BigInt(words[1]!) << 32n) | BigInt(words[0]!));
}

/**
 * The hash input's bytes, reused by every call: this runs for every routed document, and the
 * input is written and hashed before the next call can start (nothing here awaits).
 */
const input = new ByteWriter(64);

/** The MD5 digest's words (see `md5Words`; overwritten by the next call), whose first two are the hash. Throws as `hashShardKeyValue`. */
function hashWords(value: Value, seed: number): Uint32Array {
  input.reset();
  input.int32LE(seed);
  writeElement(input, value, undefined);
  return md5Words(input.buffer(), input.length);
}

/**
 * MongoDB's `safeNumberLongForHash`: doubles truncate toward zero, NaN becomes 0, values beyond
 * int64 saturate; int64 passes through. Returns a bigint in int64 range. Throws nothing.
 */
export function squashNumberForHash(value: number | bigint): bigint {
  if (typeof value === 'bigint') return value;
  if (Number.isNaN(value)) return 0n;
  if (value >= 2 ** 63) return INT64_MAX;
  if (value < -(2 ** 63)) return INT64_MIN;
  return BigInt(Math.trunc(value));
}

function writeElement(out: ByteWriter, value: Value, fieldName: string | undefined): void {
  const bracket = typeBracketOf(value);
  out.int32LE(CANONICAL_TYPE[bracket]);
  if (fieldName !== undefined) writeCString(out, fieldName);
  switch (bracket) {
    case 'minKey':
    case 'maxKey':
    case 'null':
      return;
    case 'number':
      return writeNumber(out, numericValueOf(value));
    case 'string': {
      const bytes = encodeUtf8(value as string);
      out.int32LE(bytes.length + 1);
      out.raw(bytes);
      return out.byte(0);
    }
    case 'bool':
      return out.byte(value === true ? 1 : 0);
    case 'date':
      return writeNumber(out, (value as Date).getTime());
    case 'objectId':
      return out.raw((value as ObjectId).id);
    case 'binData': {
      const bytes = binaryBytes(value as Binary);
      out.int32LE(bytes.length);
      out.byte((value as Binary).sub_type);
      return out.raw(bytes);
    }
    case 'timestamp':
      out.int32LE((value as Timestamp).i);
      return out.int32LE((value as Timestamp).t);
    case 'regex': {
      const { pattern, flags } = regexParts(value as RegExp);
      writeCString(out, pattern);
      return writeCString(out, flags);
    }
    case 'array':
      (value as ValueArray).forEach((element, index) => writeElement(out, element, String(index)));
      return out.int32LE(END_OF_OBJECT_TYPE);
    case 'object':
      for (const [name, field] of Object.entries(value as ValueObject)) writeElement(out, field, name);
      return out.int32LE(END_OF_OBJECT_TYPE);
  }
}

/** `squashNumberForHash(value)` as int64LE; a safe integer is written in two halves, without a bigint. */
function writeNumber(out: ByteWriter, value: number | bigint): void {
  const truncated = typeof value === 'number' ? Math.trunc(value) : value;
  if (typeof truncated === 'number' && Number.isSafeInteger(truncated)) {
    out.int32LE(truncated >>> 0);
    return out.int32LE(Math.floor(truncated / 2 ** 32));
  }
  out.int64LE(squashNumberForHash(value));
}

function writeCString(out: ByteWriter, text: string): void {
  out.raw(encodeUtf8(text));
  out.byte(0);
}
