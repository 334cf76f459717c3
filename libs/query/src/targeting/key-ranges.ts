/**
 * The shard key ranges a filter can match (query isolation, reference "Querying"): equality on
 * the whole key gives points, a range on the key's prefix gives ranges, anything else the
 * whole key space. The result is always a superset of where matching documents live; it never
 * misses one (property-tested against `parseFilter`).
 *
 * Bounds are shard keys compared with core `compareShardKeys`, so a bound may have one value
 * more than the pattern: `[...k, MinKey]` sorts right after the key `k` and below every other
 * key (a shorter key that is a prefix sorts first), so `pointRange(k) = [k, [...k, MinKey])`
 * holds exactly `k`. The same suffix expresses "just after every key with prefix p":
 * `[...p, MaxKey, ..., MaxKey, MinKey]`. Encoded with core `encodeKey` these bounds work
 * unchanged on the `shard_key bytea` column (encodings are self-delimiting); for the router's
 * `RoutingTable`, which wants keys of the pattern's arity, use `shardsForKeyRanges`.
 */
import { MaxKey, MinKey } from 'bson';
import { compareShardKeys, globalMaxKey, globalMinKey, hashShardKeyValue, typeBracketOf } from '@tessera/core';
import type { ChunkRange, ShardKey, ShardKeyPattern, Value, ValueObject } from '@tessera/core';
import { validateFilter } from '../filter/parse-filter.js';
import { isDocument, isRegex } from '../values.js';
import { FULL_INTERVALS, intersectIntervals, intervalsForCondition, isPoint, unionIntervals } from './value-intervals.js';
import type { Interval, IntervalSet } from './value-intervals.js';

/** Above this many points a compound key's later fields are left unconstrained (ranges stay few). */
const MAX_POINTS = 512;

/** Returns the range holding exactly the key `key`: `[key, [...key, MinKey])`. Throws nothing. */
export function pointRange(key: ShardKey): ChunkRange {
  return { min: key, max: [...key, new MinKey()] };
}

/** Returns the key a range holds alone, when it is `pointRange(key)` for a key of the pattern's arity; undefined otherwise. Throws nothing for supported values. */
export function keyOfPointRange(pattern: ShardKeyPattern, range: ChunkRange): ShardKey | undefined {
  const n = pattern.fields.length;
  if (range.min.length !== n || range.max.length !== n + 1 || typeBracketOf(range.max[n] as Value) !== 'minKey') return undefined;
  return compareShardKeys(range.min, range.max.slice(0, n)) === 0 ? range.min : undefined;
}

/** Returns the whole key space of a pattern, `[MinKey..., MaxKey...)`. Throws nothing. */
export function fullKeyRange(pattern: ShardKeyPattern): ChunkRange {
  return { min: globalMinKey(pattern), max: globalMaxKey(pattern) };
}

/**
 * Returns the key ranges (sorted, merged, inside the key space) that can hold documents
 * matching `filter`; the full key space when the filter does not constrain the key's prefix,
 * an empty list when nothing can match. Hashed fields: equality and `$in` hash the values,
 * ranges give the whole field. `$and` (and a filter's fields) intersect, `$or` unions, `$nor`
 * and negations give up (full).
 * Throws `BAD_VALUE` as `parseFilter` for an invalid filter.
 */
export function keyRangesForFilter(pattern: ShardKeyPattern, filter: unknown): ChunkRange[] {
  const normalized = validateFilter(filter, '');
  const key = pointKeyOf(pattern, normalized);
  if (key !== undefined) return [pointRange(key)];
  return intersectRangeSets(rangesForConjunction(pattern, normalized), [fullKeyRange(pattern)]);
}

/**
 * The key a filter gives by plain equality on every field of the pattern, with no `$and` or
 * `$or` that could narrow it further: the point query, whose ranges the general path would
 * answer as `[pointRange(key)]` after building and intersecting intervals (MongoDB's targeting
 * also tries the exact shard key first). Undefined when the general path is needed: an
 * operator, an embedded document, an array or a regex on a key field, MinKey or MaxKey.
 */
function pointKeyOf(pattern: ShardKeyPattern, filter: ValueObject): ShardKey | undefined {
  if (Object.hasOwn(filter, '$and') || Object.hasOwn(filter, '$or')) return undefined;
  const key: Value[] = [];
  for (const field of pattern.fields) {
    if (!Object.hasOwn(filter, field.path)) return undefined;
    const value = filter[field.path] as Value;
    if (isDocument(value) || Array.isArray(value) || isRegex(value)) return undefined;
    const bracket = typeBracketOf(value);
    if (bracket === 'minKey' || bracket === 'maxKey') return undefined;
    key.push(field.hashed ? hashShardKeyValue(value) : value);
  }
  return key;
}

/** True when the ranges are exactly the pattern's whole key space. Throws nothing for supported values. */
export function isFullKeySpace(pattern: ShardKeyPattern, ranges: readonly ChunkRange[]): boolean {
  const [only] = ranges;
  return (
    ranges.length === 1 &&
    only !== undefined &&
    compareShardKeys(only.min, globalMinKey(pattern)) <= 0 &&
    compareShardKeys(only.max, globalMaxKey(pattern)) >= 0
  );
}

function rangesForConjunction(pattern: ShardKeyPattern, filter: ValueObject): ChunkRange[] {
  const perField: IntervalSet[] = pattern.fields.map(() => FULL_INTERVALS);
  const others: ChunkRange[][] = [];
  for (const [key, condition] of Object.entries(filter)) {
    if (key === '$and') {
      for (const sub of condition as ValueObject[]) others.push(rangesForConjunction(pattern, sub));
    } else if (key === '$or') {
      others.push(unionRangeSets((condition as ValueObject[]).map((sub) => rangesForConjunction(pattern, sub))));
    } else {
      const index = pattern.fields.findIndex((f) => f.path === key);
      if (index >= 0) perField[index] = intersectIntervals(perField[index] as IntervalSet, intervalsForCondition(condition));
    }
  }
  const hashedApplied = perField.map((set, i) => (pattern.fields[i]?.hashed ? hashIntervals(set) : set));
  return others.reduce(intersectRangeSets, rangesFromFieldIntervals(hashedApplied));
}

/** A hashed field keeps its points (hashed); any non-point interval means every hash value. */
function hashIntervals(set: IntervalSet): IntervalSet {
  if (!set.every(isPoint)) return FULL_INTERVALS;
  return unionIntervals([
    set.map((i) => hashShardKeyValue(i.lo.value)).map((value) => ({ lo: { value, inclusive: true }, hi: { value, inclusive: true } })),
  ]);
}

/**
 * Builds key ranges from per-field intervals: while fields are points, prefixes multiply; the
 * first field with a non-point interval bounds the ranges and the fields after it are free.
 */
function rangesFromFieldIntervals(perField: readonly IntervalSet[]): ChunkRange[] {
  const n = perField.length;
  const pad = (prefix: readonly Value[], filler: () => Value): Value[] => [...prefix, ...Array.from({ length: n - prefix.length }, filler)];
  const startOf = (prefix: readonly Value[]): ShardKey => pad(prefix, () => new MinKey());
  const after = (prefix: readonly Value[]): ShardKey => [...pad(prefix, () => new MaxKey()), new MinKey()];
  let prefixes: Value[][] = [[]];
  for (const set of perField) {
    if (set.length === 0) return [];
    if (set.every(isPoint) && prefixes.length * set.length <= MAX_POINTS) {
      prefixes = prefixes.flatMap((p) => set.map((i) => [...p, i.lo.value]));
      continue;
    }
    return unionRangeSets(
      prefixes.map((p) =>
        set.map((i: Interval) => ({
          min: i.lo.inclusive ? startOf([...p, i.lo.value]) : after([...p, i.lo.value]),
          max: i.hi.inclusive ? after([...p, i.hi.value]) : startOf([...p, i.hi.value]),
        })),
      ),
    );
  }
  return unionRangeSets([prefixes.map(pointRange)]);
}

/** Returns the union of range lists, sorted by min and merged. Throws nothing for supported values. */
export function unionRangeSets(sets: readonly (readonly ChunkRange[])[]): ChunkRange[] {
  const all = sets
    .flat()
    .filter((r) => compareShardKeys(r.min, r.max) < 0)
    .sort((a, b) => compareShardKeys(a.min, b.min));
  const out: ChunkRange[] = [];
  for (const range of all) {
    const last = out[out.length - 1];
    if (last !== undefined && compareShardKeys(range.min, last.max) <= 0) {
      if (compareShardKeys(range.max, last.max) > 0) out[out.length - 1] = { min: last.min, max: range.max };
    } else {
      out.push(range);
    }
  }
  return out;
}

/** Returns the intersection of two range lists, sorted and merged. Throws nothing for supported values. */
export function intersectRangeSets(a: readonly ChunkRange[], b: readonly ChunkRange[]): ChunkRange[] {
  const out: ChunkRange[] = [];
  for (const x of a) {
    for (const y of b) {
      const min = compareShardKeys(x.min, y.min) >= 0 ? x.min : y.min;
      const max = compareShardKeys(x.max, y.max) <= 0 ? x.max : y.max;
      if (compareShardKeys(min, max) < 0) out.push({ min, max });
    }
  }
  return unionRangeSets([out]);
}
