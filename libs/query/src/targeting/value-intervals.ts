/**
 * Sets of values one shard key field may hold in documents matching a condition, as sorted,
 * disjoint intervals in MongoDB's value order. They are always a superset: when in doubt an
 * operator yields the full interval, never fewer values than can match.
 */
import { Binary, BSONRegExp, MaxKey, MinKey, ObjectId, Timestamp } from 'bson';
import { compareValues, typeBracketOf } from '@tessera/core';
import type { TypeBracket, Value, ValueObject } from '@tessera/core';
import { isDocument, isRegex } from '../values.js';

/** One end of an interval. */
export interface Bound {
  readonly value: Value;
  readonly inclusive: boolean;
}

/** The values between two bounds. */
export interface Interval {
  readonly lo: Bound;
  readonly hi: Bound;
}

/** Sorted, disjoint intervals; empty means no value. */
export type IntervalSet = readonly Interval[];

/** Every value, MinKey to MaxKey. */
export const FULL_INTERVALS: IntervalSet = [{ lo: { value: new MinKey(), inclusive: true }, hi: { value: new MaxKey(), inclusive: true } }];

const BRACKET_ORDER: readonly TypeBracket[] = [
  'minKey',
  'null',
  'number',
  'string',
  'object',
  'array',
  'binData',
  'objectId',
  'bool',
  'date',
  'timestamp',
  'regex',
  'maxKey',
];

/** The lowest value of each type bracket, so that `$gt: 5` can stop before the strings start. */
function lowestOfBracket(bracket: TypeBracket): Value {
  switch (bracket) {
    case 'minKey':
      return new MinKey();
    case 'null':
      return null;
    case 'number':
      return NaN;
    case 'string':
      return '';
    case 'object':
      return {};
    case 'array':
      return [];
    case 'binData':
      return new Binary(new Uint8Array(0), 0);
    case 'objectId':
      return new ObjectId('000000000000000000000000');
    case 'bool':
      return false;
    case 'date':
      return new Date(-8.64e15);
    case 'timestamp':
      return new Timestamp({ t: 0, i: 0 });
    case 'regex':
      return new BSONRegExp('', '');
    case 'maxKey':
      return new MaxKey();
  }
}

/** True when the interval holds exactly one value. Throws nothing for supported values. */
export function isPoint(interval: Interval): boolean {
  return interval.lo.inclusive && interval.hi.inclusive && compareValues(interval.lo.value, interval.hi.value) === 0;
}

function point(value: Value): Interval {
  return { lo: { value, inclusive: true }, hi: { value, inclusive: true } };
}

function compareLo(a: Bound, b: Bound): number {
  return compareValues(a.value, b.value) || (a.inclusive === b.inclusive ? 0 : a.inclusive ? -1 : 1);
}

function compareHi(a: Bound, b: Bound): number {
  return compareValues(a.value, b.value) || (a.inclusive === b.inclusive ? 0 : a.inclusive ? 1 : -1);
}

function isEmpty(interval: Interval): boolean {
  const c = compareValues(interval.lo.value, interval.hi.value);
  return c > 0 || (c === 0 && !(interval.lo.inclusive && interval.hi.inclusive));
}

/** Returns the union of interval sets, sorted and merged. Throws nothing for supported values. */
export function unionIntervals(sets: readonly IntervalSet[]): IntervalSet {
  const all = sets
    .flat()
    .filter((i) => !isEmpty(i))
    .sort((a, b) => compareLo(a.lo, b.lo));
  const out: Interval[] = [];
  for (const interval of all) {
    const last = out[out.length - 1];
    const c = last === undefined ? 1 : compareValues(interval.lo.value, last.hi.value);
    if (last !== undefined && (c < 0 || (c === 0 && (interval.lo.inclusive || last.hi.inclusive)))) {
      if (compareHi(interval.hi, last.hi) > 0) out[out.length - 1] = { lo: last.lo, hi: interval.hi };
    } else {
      out.push(interval);
    }
  }
  return out;
}

/** Returns the intersection of two interval sets. Throws nothing for supported values. */
export function intersectIntervals(a: IntervalSet, b: IntervalSet): IntervalSet {
  const out: Interval[] = [];
  for (const x of a) {
    for (const y of b) {
      const lo = compareLo(x.lo, y.lo) >= 0 ? x.lo : y.lo;
      const hi = compareHi(x.hi, y.hi) <= 0 ? x.hi : y.hi;
      if (!isEmpty({ lo, hi })) out.push({ lo, hi });
    }
  }
  return unionIntervals([out]);
}

/** The values a plain equality (`{f: v}` or `$eq`) can match on a shard key field: arrays and regexes give up (full). */
function equalityIntervals(value: Value): IntervalSet {
  if (Array.isArray(value) || isRegex(value)) return FULL_INTERVALS;
  return [point(value)];
}

function rangeIntervals(operator: '$gt' | '$gte' | '$lt' | '$lte', bound: Value): IntervalSet {
  const bracket = typeBracketOf(bound);
  if (bracket === 'minKey' || bracket === 'maxKey') return FULL_INTERVALS;
  // $gte/$lte null match null and missing fields (both null in a shard key); $gt/$lt null match nothing.
  if (bracket === 'null') return operator === '$gte' || operator === '$lte' ? [point(null)] : [];
  const next = BRACKET_ORDER[BRACKET_ORDER.indexOf(bracket) + 1] as TypeBracket;
  if (operator === '$gt' || operator === '$gte') {
    return [{ lo: { value: bound, inclusive: operator === '$gte' }, hi: { value: lowestOfBracket(next), inclusive: false } }];
  }
  return [{ lo: { value: lowestOfBracket(bracket), inclusive: true }, hi: { value: bound, inclusive: operator === '$lte' } }];
}

/**
 * Returns the values a field may hold in documents matching `condition` (a validated filter's
 * condition on that field): equality and `$eq` give a point, `$in` points, `$gt/$gte/$lt/$lte`
 * an interval within the operand's type bracket, several operators intersect; anything else
 * (`$ne`, `$nin`, `$not`, `$regex`, `$exists`, `$type`, array operators, arrays, regexes) the
 * full interval. Throws nothing for validated conditions.
 */
export function intervalsForCondition(condition: Value): IntervalSet {
  if (!isDocument(condition) || !Object.keys(condition).some((k) => k.startsWith('$'))) return equalityIntervals(condition);
  let result: IntervalSet = FULL_INTERVALS;
  for (const [operator, operand] of Object.entries(condition as ValueObject)) {
    switch (operator) {
      case '$eq':
        result = intersectIntervals(result, equalityIntervals(operand));
        break;
      case '$in':
        result = intersectIntervals(result, unionIntervals((operand as Value[]).map(equalityIntervals)));
        break;
      case '$gt':
      case '$gte':
      case '$lt':
      case '$lte':
        result = intersectIntervals(result, rangeIntervals(operator, operand));
        break;
      default:
        break;
    }
  }
  return result;
}
