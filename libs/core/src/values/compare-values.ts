/**
 * The total order over values: MongoDB's cross-type order (by canonical type), then by value
 * within a type. This is the order that key encoding preserves bytewise.
 */
import type { Binary, ObjectId, Timestamp } from 'bson';
import { binaryBytes, CANONICAL_TYPE, numericValueOf, regexParts, typeBracketOf } from './value.js';
import type { Value, ValueArray, ValueObject } from './value.js';
import { compareStrings } from './utf8.js';
import type { StringComparator } from './collation.js';

/** A comparison result: negative, zero or positive as in `Array.prototype.sort`. */
export type Ordering = -1 | 0 | 1;

/**
 * Compares two values in MongoDB's order: MinKey < null < numbers < strings < objects <
 * arrays < binData < ObjectId < booleans < dates < timestamps < regexes < MaxKey. Numbers
 * compare by exact mathematical value across int32, int64 and double; NaN equals NaN and is
 * below every other number; -0 equals 0. Objects compare field by field (type, then name,
 * then value), arrays element by element; a prefix sorts first.
 * Strings compare by UTF-8 bytes, or by `strings` under a collation (`stringComparatorFor`).
 * Returns -1, 0 or 1. Throws `BAD_VALUE` for unsupported types (see `typeBracketOf`).
 */
export function compareValues(a: Value, b: Value, strings?: StringComparator): Ordering {
  const ta = typeBracketOf(a);
  const tb = typeBracketOf(b);
  if (ta !== tb) return CANONICAL_TYPE[ta] < CANONICAL_TYPE[tb] ? -1 : 1;
  switch (ta) {
    case 'minKey':
    case 'maxKey':
    case 'null':
      return 0;
    case 'number':
      return compareNumbers(numericValueOf(a), numericValueOf(b));
    case 'string':
      return strings === undefined ? compareStrings(a as string, b as string) : strings(a as string, b as string);
    case 'bool':
      return a === b ? 0 : a === false ? -1 : 1;
    case 'date':
      return sign((a as Date).getTime() - (b as Date).getTime());
    case 'objectId':
      return compareBytes((a as ObjectId).id, (b as ObjectId).id);
    case 'binData':
      return compareBinaries(a as Binary, b as Binary);
    case 'timestamp':
      return compareTimestamps(a as Timestamp, b as Timestamp);
    case 'regex': {
      const x = regexParts(a as RegExp);
      const y = regexParts(b as RegExp);
      return compareStrings(x.pattern, y.pattern) || compareStrings(x.flags, y.flags);
    }
    case 'array':
      return compareArrays(a as ValueArray, b as ValueArray, strings);
    case 'object':
      return compareObjects(a as ValueObject, b as ValueObject, strings);
  }
}

/** True when `a` and `b` are equal in the value order (`compareValues(a, b, strings) === 0`). Throws as `compareValues`. */
export function valuesEqual(a: Value, b: Value, strings?: StringComparator): boolean {
  return compareValues(a, b, strings) === 0;
}

/**
 * Compares two numbers exactly, whether doubles (`number`) or int64 (`bigint`): an int64
 * beyond 2^53 is never rounded. NaN is lowest and equals NaN. Returns -1, 0 or 1. Throws nothing.
 */
export function compareNumbers(a: number | bigint, b: number | bigint): Ordering {
  if (typeof a === 'number' && typeof b === 'number') {
    if (Number.isNaN(a)) return Number.isNaN(b) ? 0 : -1;
    if (Number.isNaN(b)) return 1;
    return a < b ? -1 : a > b ? 1 : 0;
  }
  if (typeof a === 'bigint' && typeof b === 'bigint') return a < b ? -1 : a > b ? 1 : 0;
  if (typeof a === 'number') return compareDoubleToInt64(a, b as bigint);
  return (-compareDoubleToInt64(b as number, a) || 0) as Ordering;
}

function compareDoubleToInt64(d: number, n: bigint): Ordering {
  if (Number.isNaN(d) || d === -Infinity) return -1;
  if (d === Infinity) return 1;
  const floor = BigInt(Math.floor(d));
  if (Number.isInteger(d)) return floor < n ? -1 : floor > n ? 1 : 0;
  return n <= floor ? 1 : -1;
}

/** Compares two byte strings as `memcmp` then length does. Returns -1, 0 or 1. Throws nothing. */
export function compareBytes(a: Uint8Array, b: Uint8Array): Ordering {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a[i] as number;
    const y = b[i] as number;
    if (x !== y) return x < y ? -1 : 1;
  }
  return a.length < b.length ? -1 : a.length > b.length ? 1 : 0;
}

function compareBinaries(a: Binary, b: Binary): Ordering {
  // MongoDB orders BinData by length, then subtype, then bytes.
  const x = binaryBytes(a);
  const y = binaryBytes(b);
  if (x.length !== y.length) return x.length < y.length ? -1 : 1;
  if (a.sub_type !== b.sub_type) return a.sub_type < b.sub_type ? -1 : 1;
  return compareBytes(x, y);
}

function compareTimestamps(a: Timestamp, b: Timestamp): Ordering {
  return sign(a.t - b.t) || sign(a.i - b.i);
}

function compareArrays(a: ValueArray, b: ValueArray, strings: StringComparator | undefined): Ordering {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const c = compareValues(a[i] as Value, b[i] as Value, strings);
    if (c !== 0) return c;
  }
  return sign(a.length - b.length);
}

function compareObjects(a: ValueObject, b: ValueObject, strings: StringComparator | undefined): Ordering {
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  const n = Math.min(ka.length, kb.length);
  for (let i = 0; i < n; i++) {
    const fa = ka[i] as string;
    const fb = kb[i] as string;
    const va = a[fa] as Value;
    const vb = b[fb] as Value;
    // Per element: canonical type first, then field name, then value (BSONElement::woCompare).
    const ca = CANONICAL_TYPE[typeBracketOf(va)];
    const cb = CANONICAL_TYPE[typeBracketOf(vb)];
    if (ca !== cb) return ca < cb ? -1 : 1;
    // Field names always compare by bytes: a collation applies to string values only.
    const c = compareStrings(fa, fb) || compareValues(va, vb, strings);
    if (c !== 0) return c;
  }
  return sign(ka.length - kb.length);
}

function sign(x: number): Ordering {
  return x < 0 ? -1 : x > 0 ? 1 : 0;
}
