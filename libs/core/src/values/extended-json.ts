/**
 * Documents travel as MongoDB Extended JSON. Parsing and printing go through the `bson`
 * package's EJSON; these wrappers fix the options so int64 values survive a round trip.
 */
import { EJSON, Long } from 'bson';
import { TesseraError } from '../errors.js';
import type { Value } from './value.js';

/**
 * Parses Extended JSON text (relaxed or canonical) into a value. `$numberLong` becomes a
 * `bigint` (exact), `$date` a `Date`, `$oid` an `ObjectId`, `$minKey`/`$maxKey` MinKey/MaxKey;
 * plain JSON numbers become doubles (JSON itself cannot carry integers beyond 2^53).
 * Throws `FAILED_TO_PARSE` when `text` is not valid Extended JSON.
 */
export function parseExtendedJson(text: string): Value {
  try {
    return EJSON.parse(text, { relaxed: true, useBigInt64: true }) as Value;
  } catch (cause) {
    throw new TesseraError('FAILED_TO_PARSE', `Invalid Extended JSON: ${(cause as Error).message}`, { cause });
  }
}

/**
 * Converts a plain JSON-shaped object (e.g. already parsed by an HTTP framework) into a value
 * by interpreting its Extended JSON wrappers (`{"$oid": ...}`, `{"$numberLong": ...}`, ...).
 * Throws `FAILED_TO_PARSE` when a wrapper is malformed.
 */
export function fromExtendedJsonObject(json: unknown): Value {
  try {
    return EJSON.deserialize(json as Parameters<typeof EJSON.deserialize>[0], { relaxed: true, useBigInt64: true }) as Value;
  } catch (cause) {
    throw new TesseraError('FAILED_TO_PARSE', `Invalid Extended JSON: ${(cause as Error).message}`, { cause });
  }
}

/**
 * Prints a value as relaxed Extended JSON. Integers that a double cannot hold exactly
 * (int64 beyond 2^53) are printed as `{"$numberLong": "..."}` so they parse back exactly.
 * Throws nothing for supported values.
 */
export function toExtendedJson(value: Value): string {
  return EJSON.stringify(protectLargeIntegers(value), { relaxed: true });
}

/**
 * Returns the JSON-shaped (Extended JSON relaxed) form of a value, for embedding in a
 * larger JSON payload. Same int64 rule as `toExtendedJson`. Throws nothing for supported values.
 */
export function toExtendedJsonObject(value: Value): unknown {
  return EJSON.serialize(protectLargeIntegers(value) as Parameters<typeof EJSON.serialize>[0], { relaxed: true });
}

function protectLargeIntegers(value: unknown): unknown {
  if (typeof value === 'bigint') return isSafe(value) ? Number(value) : { $numberLong: value.toString() };
  // Not `instanceof Long`: a Timestamp is a subclass of Long in the bson package.
  if (value instanceof Long && value._bsontype === 'Long')
    return isSafe(value.toBigInt()) ? value.toNumber() : { $numberLong: value.toString() };
  if (Array.isArray(value)) return value.map(protectLargeIntegers);
  if (value !== null && typeof value === 'object' && isPlainObject(value)) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = protectLargeIntegers(v);
    return out;
  }
  return value;
}

function isPlainObject(value: object): boolean {
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function isSafe(n: bigint): boolean {
  return n >= BigInt(Number.MIN_SAFE_INTEGER) && n <= BigInt(Number.MAX_SAFE_INTEGER);
}
