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
import { md5 } from './md5.js';

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
  // From the two little-endian halves: no bigint on the way (this runs for every routed document).
  const digest = hashDigest(value, seed);
  const half = (at: number) => digest[at]! | (digest[at + 1]! << 8) | (digest[at + 2]! << 16) | (digest[at + 3]! << 24);
  return Long.fromBits(half(0), half(4));
}

/** Returns MongoDB's 64-bit hash of `value` with `seed` as a `bigint`. Throws as `hashShardKeyValue`. */
export function hash64(value: Value, seed: number = HASHED_INDEX_SEED): bigint {
  return new DataView(hashDigest(value, seed).buffer).getBigInt64(0, true);
}

/** The MD5 digest whose first 8 bytes are the hash. Throws as `hashShardKeyValue`. */
function hashDigest(value: Value, seed: number): Uint8Array {
  const out = new ByteWriter(64);
  out.int32LE(seed);
  writeElement(out, value, undefined);
  return md5(out.buffer().subarray(0, out.length));
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
      return out.int64LE(squashNumberForHash(numericValueOf(value)));
    case 'string': {
      const bytes = encodeUtf8(value as string);
      out.int32LE(bytes.length + 1);
      out.raw(bytes);
      return out.byte(0);
    }
    case 'bool':
      return out.byte(value === true ? 1 : 0);
    case 'date':
      return out.int64LE(BigInt((value as Date).getTime()));
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

function writeCString(out: ByteWriter, text: string): void {
  out.raw(encodeUtf8(text));
  out.byte(0);
}
