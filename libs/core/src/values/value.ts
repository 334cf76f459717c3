/**
 * The values Tessera stores and orders: JSON plus the BSON types JSON lacks, as the `bson`
 * package represents them after `EJSON.parse`. Every value belongs to one type bracket of
 * MongoDB's cross-type order; brackets are numbered with MongoDB's `canonicalizeBSONType`.
 */
import type { Binary, BSONRegExp, Decimal128, Double, Int32, Long, MaxKey, MinKey, ObjectId, Timestamp } from 'bson';
import { TesseraError } from '../errors.js';

/** A document value. Numbers may be JS numbers (doubles), `bigint`/`Long` (int64), `Int32` or `Double`. */
export type Value =
  | null
  | boolean
  | number
  | bigint
  | string
  | Date
  | RegExp
  | ObjectId
  | Int32
  | Double
  | Long
  | Decimal128
  | Binary
  | Timestamp
  | BSONRegExp
  | MinKey
  | MaxKey
  | ValueArray
  | ValueObject;

/** An array value. */
export type ValueArray = readonly Value[];

/** An embedded document (or a whole document). Field order is insertion order. */
export interface ValueObject {
  readonly [field: string]: Value;
}

/**
 * MongoDB's canonical type numbers (`canonicalizeBSONType`): values of different brackets
 * compare by these numbers; values in one bracket compare by value. Numbers of every width
 * share one bracket, so `1 == 1.0 == Long(1)`.
 */
export const CANONICAL_TYPE = {
  minKey: -1,
  null: 5,
  number: 10,
  string: 15,
  object: 20,
  array: 25,
  binData: 30,
  objectId: 35,
  bool: 40,
  date: 45,
  timestamp: 47,
  regex: 50,
  maxKey: 127,
} as const;

/** The name of a type bracket of the cross-type order. */
export type TypeBracket = keyof typeof CANONICAL_TYPE;

interface BsonTagged {
  readonly _bsontype: string;
}

function isBsonTagged(value: object): value is BsonTagged {
  return typeof (value as Partial<BsonTagged>)._bsontype === 'string';
}

/**
 * Returns the type bracket of `value`.
 * Throws `BAD_VALUE` for types Tessera does not order (Decimal128, Code, DBRef, Symbol,
 * undefined, functions, invalid dates).
 */
export function typeBracketOf(value: Value): TypeBracket {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'number':
    case 'bigint':
      return 'number';
    case 'string':
      return 'string';
    case 'boolean':
      return 'bool';
    case 'object':
      break;
    default:
      throw unsupported(typeof value);
  }
  if (Array.isArray(value)) return 'array';
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) throw new TesseraError('BAD_VALUE', 'An invalid Date cannot be stored or compared.');
    return 'date';
  }
  if (value instanceof RegExp) return 'regex';
  if (isBsonTagged(value)) {
    switch (value._bsontype) {
      case 'Int32':
      case 'Double':
      case 'Long':
        return 'number';
      case 'ObjectId':
        return 'objectId';
      case 'Binary':
        return 'binData';
      case 'Timestamp':
        return 'timestamp';
      case 'BSONRegExp':
        return 'regex';
      case 'MinKey':
        return 'minKey';
      case 'MaxKey':
        return 'maxKey';
      default:
        throw unsupported(value._bsontype);
    }
  }
  return 'object';
}

/** Returns MongoDB's canonical type number of `value` (see `CANONICAL_TYPE`). Throws as `typeBracketOf`. */
export function canonicalTypeOf(value: Value): number {
  return CANONICAL_TYPE[typeBracketOf(value)];
}

/**
 * Returns the exact numeric value of a number-bracket value: a JS number for doubles and
 * 32-bit ints, a `bigint` for int64 (`Long`, `bigint`). Throws `BAD_VALUE` if `value` is not a number.
 */
export function numericValueOf(value: Value): number | bigint {
  if (typeof value === 'number' || typeof value === 'bigint') return value;
  if (value !== null && typeof value === 'object' && isBsonTagged(value)) {
    // From the two 32-bit halves: bson's Long.toBigInt goes through a decimal string.
    if (value._bsontype === 'Long') return longToBigInt(value as Long);
    if (value._bsontype === 'Int32' || value._bsontype === 'Double') return (value as Int32 | Double).value;
  }
  throw new TesseraError('BAD_VALUE', 'Expected a number.');
}

/** The exact value of a `Long`, signed or unsigned. Throws nothing. */
export function longToBigInt(value: Long): bigint {
  const bits = (BigInt(value.high >>> 0) << 32n) | BigInt(value.low >>> 0);
  return value.unsigned ? bits : BigInt.asIntN(64, bits);
}

/** Returns the bytes of a `Binary` value (without slack capacity). Throws nothing. */
export function binaryBytes(value: Binary): Uint8Array {
  return value.buffer.subarray(0, value.position);
}

/** Returns the pattern and flags of a regular expression value. Throws nothing. */
export function regexParts(value: RegExp | BSONRegExp): { pattern: string; flags: string } {
  if (value instanceof RegExp) return { pattern: value.source, flags: [...value.flags].sort().join('') };
  return { pattern: value.pattern, flags: value.options };
}

function unsupported(typeName: string): TesseraError {
  return new TesseraError('BAD_VALUE', `Values of type ${typeName} are not supported in keys or comparisons.`, {
    details: { type: typeName },
  });
}
