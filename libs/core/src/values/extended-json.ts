/**
 * Documents travel as MongoDB Extended JSON. Parsing and printing go through the `bson`
 * package's EJSON; these wrappers fix the options so int64 values survive a round trip.
 */
import { EJSON, Long, ObjectId } from 'bson';
import { TesseraError } from '../errors.js';
import { type Value, longToBigInt } from './value.js';

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
    const copied = copyPlainJson(json);
    return (copied === NOT_PLAIN ? deserializeWithBson(json) : copied) as Value;
  } catch (cause) {
    throw new TesseraError('FAILED_TO_PARSE', `Invalid Extended JSON: ${(cause as Error).message}`, { cause });
  }
}

/*
 * Fast paths. bson's EJSON.deserialize and EJSON.serialize each print their input to JSON text
 * and parse it back, which costs more than anything else a document goes through on its way to
 * Postgres. Most of a document is plain JSON that both conversions leave as it is, so the two
 * walks below copy plain JSON themselves and hand bson only what it must convert. That gives the
 * same result, because bson converts each value from that value alone (its JSON.parse reviver
 * runs bottom-up, and its serializer maps values one by one). What they copy follows the JSON
 * round trip: -0 becomes 0, an undefined field is dropped on the way in and null on the way out.
 * Anything unusual (a value JSON cannot hold, a key with a NUL byte, `__proto__`, `_bsontype`)
 * sends the whole value the slow way, so its result or error is bson's own.
 */
const NOT_PLAIN = Symbol('not plain JSON');

function deserializeWithBson(json: unknown): unknown {
  return EJSON.deserialize(json as Parameters<typeof EJSON.deserialize>[0], { relaxed: true, useBigInt64: true });
}

function serializeWithBson(value: unknown): unknown {
  return EJSON.serialize(value as Parameters<typeof EJSON.serialize>[0], { relaxed: true });
}

function isPlainObject(value: object): boolean {
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** A copy of parsed JSON with Extended JSON wrappers converted; NOT_PLAIN when bson must read the whole value. */
function copyPlainJson(json: unknown): unknown {
  switch (typeof json) {
    case 'string':
    case 'boolean':
      return json;
    case 'number':
      return Number.isFinite(json) ? json + 0 : NOT_PLAIN;
    case 'object': {
      if (json === null) return null;
      if (Array.isArray(json)) {
        const out: unknown[] = new Array(json.length);
        for (let i = 0; i < json.length; i++) {
          const element = copyPlainJson(json[i]);
          if (element === NOT_PLAIN || element === undefined) return NOT_PLAIN;
          out[i] = element;
        }
        return out;
      }
      if (!isPlainObject(json)) return NOT_PLAIN;
      const source = json as Record<string, unknown>;
      const keys = Object.keys(source);
      // `{"$oid": ...}` is in nearly every document (the generated `_id`): built as bson's codec
      // builds it (`new ObjectId(doc.$oid)`, its error included), without printing and parsing.
      if (keys.length === 1 && keys[0] === '$oid' && typeof source['$oid'] === 'string') return new ObjectId(source['$oid']);
      // Any other `$` field may make this object a wrapper: bson reads it, with what is inside.
      if (keys.some((key) => key.startsWith('$'))) return deserializeWithBson(source);
      const out: Record<string, unknown> = {};
      for (const key of keys) {
        if (key.includes('\0') || key === '__proto__') return NOT_PLAIN;
        const field = source[key];
        if (field === undefined) continue;
        const copied = copyPlainJson(field);
        if (copied === NOT_PLAIN) return NOT_PLAIN;
        out[key] = copied;
      }
      return out;
    }
    default:
      return NOT_PLAIN;
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
  const printed = printPlainJson(value);
  return printed === NOT_PLAIN ? serializeWithBson(protectLargeIntegers(value)) : printed;
}

/** The relaxed Extended JSON of a value, bson printing only the values JSON lacks; NOT_PLAIN when bson must print all of it. */
function printPlainJson(value: unknown): unknown {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'undefined':
      return null;
    case 'number':
      return Number.isFinite(value) ? value + 0 : serializeWithBson(value);
    case 'bigint':
      return protectLargeIntegers(value);
    case 'object': {
      if (value === null) return null;
      if (Array.isArray(value)) {
        const out: unknown[] = new Array(value.length);
        for (let i = 0; i < value.length; i++) {
          const element = printPlainJson(value[i]);
          if (element === NOT_PLAIN) return NOT_PLAIN;
          out[i] = element;
        }
        return out;
      }
      // An ObjectId prints as bson prints it, `{"$oid": hex}`; it is in every document.
      if (value instanceof ObjectId) return { $oid: value.toHexString() };
      if (!isPlainObject(value)) return serializeWithBson(protectLargeIntegers(value));
      const source = value as Record<string, unknown>;
      if ('_bsontype' in source) return NOT_PLAIN;
      const out: Record<string, unknown> = {};
      for (const key of Object.keys(source)) {
        if (key === '__proto__') return NOT_PLAIN;
        const printed = printPlainJson(source[key]);
        if (printed === NOT_PLAIN) return NOT_PLAIN;
        out[key] = printed;
      }
      return out;
    }
    default:
      return NOT_PLAIN;
  }
}

function protectLargeIntegers(value: unknown): unknown {
  if (typeof value === 'bigint') return isSafe(value) ? Number(value) : { $numberLong: value.toString() };
  // Not `instanceof Long`: a Timestamp is a subclass of Long in the bson package.
  if (value instanceof Long && value._bsontype === 'Long')
    return isSafe(longToBigInt(value)) ? value.toNumber() : { $numberLong: value.toString() };
  if (Array.isArray(value)) return value.map(protectLargeIntegers);
  if (value !== null && typeof value === 'object' && isPlainObject(value)) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = protectLargeIntegers(v);
    return out;
  }
  return value;
}

function isSafe(n: bigint): boolean {
  return n >= BigInt(Number.MIN_SAFE_INTEGER) && n <= BigInt(Number.MAX_SAFE_INTEGER);
}
