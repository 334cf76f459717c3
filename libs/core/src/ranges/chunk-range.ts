/**
 * Chunk ranges `[min, max)`: min inclusive, max exclusive, bounds are shard keys (one value per
 * pattern field, MinKey/MaxKey allowed). Helpers are pure and take ranges as plain data.
 */
import { TesseraError } from '../errors.js';
import type { ShardKey } from '../keys/shard-key-pattern.js';
import { compareValues } from '../values/compare-values.js';
import type { Ordering } from '../values/compare-values.js';
import { toExtendedJson } from '../values/extended-json.js';
import type { Value } from '../values/value.js';

/** A half-open key range `[min, max)`. */
export interface ChunkRange {
  readonly min: ShardKey;
  readonly max: ShardKey;
}

/**
 * Compares two shard keys field by field in value order; a shorter key that is a prefix
 * sorts first. Returns -1, 0 or 1. Throws `BAD_VALUE` for unsupported value types.
 */
export function compareShardKeys(a: ShardKey, b: ShardKey): Ordering {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const c = compareValues(a[i] as Value, b[i] as Value);
    if (c !== 0) return c;
  }
  return a.length < b.length ? -1 : a.length > b.length ? 1 : 0;
}

/** Builds a range. Throws `BAD_VALUE` unless both bounds have the same arity and min < max. */
export function makeChunkRange(min: ShardKey, max: ShardKey): ChunkRange {
  if (min.length !== max.length || min.length === 0) {
    throw new TesseraError('BAD_VALUE', `Range bounds must have the same non-zero number of fields, got ${min.length} and ${max.length}.`);
  }
  if (compareShardKeys(min, max) >= 0) {
    throw new TesseraError('BAD_VALUE', `Range min must be below max, got ${chunkRangeToString({ min, max })}.`, {
      details: { range: { min, max } },
    });
  }
  return { min, max };
}

/** True when `min <= key < max`. Throws `BAD_VALUE` for unsupported value types. */
export function rangeContainsKey(range: ChunkRange, key: ShardKey): boolean {
  return compareShardKeys(range.min, key) <= 0 && compareShardKeys(key, range.max) < 0;
}

/** True when every key of `inner` is in `outer`. Throws `BAD_VALUE` for unsupported value types. */
export function rangeContainsRange(outer: ChunkRange, inner: ChunkRange): boolean {
  return compareShardKeys(outer.min, inner.min) <= 0 && compareShardKeys(inner.max, outer.max) <= 0;
}

/** True when the ranges share at least one key. Throws `BAD_VALUE` for unsupported value types. */
export function rangesOverlap(a: ChunkRange, b: ChunkRange): boolean {
  return compareShardKeys(a.min, b.max) < 0 && compareShardKeys(b.min, a.max) < 0;
}

/** True when `b` starts exactly where `a` ends (`a.max == b.min`). Throws `BAD_VALUE` for unsupported value types. */
export function rangesAreContiguous(a: ChunkRange, b: ChunkRange): boolean {
  return compareShardKeys(a.max, b.min) === 0;
}

/** True when both bounds are equal. Throws `BAD_VALUE` for unsupported value types. */
export function rangesEqual(a: ChunkRange, b: ChunkRange): boolean {
  return compareShardKeys(a.min, b.min) === 0 && compareShardKeys(a.max, b.max) === 0;
}

/**
 * Splits a range at the given points. Returns `points.length + 1` contiguous ranges covering
 * `range`. Throws `BAD_VALUE` unless there is at least one point, points strictly increase,
 * lie strictly inside the range and have its arity.
 */
export function splitRange(range: ChunkRange, points: readonly ShardKey[]): ChunkRange[] {
  if (points.length === 0) throw new TesseraError('BAD_VALUE', 'A split needs at least one split point.');
  const bounds = [range.min, ...points, range.max];
  for (let i = 1; i < bounds.length; i++) {
    const point = bounds[i] as ShardKey;
    if (point.length !== range.min.length || compareShardKeys(bounds[i - 1] as ShardKey, point) >= 0) {
      throw new TesseraError('BAD_VALUE', `Split points must strictly increase inside ${chunkRangeToString(range)}.`, {
        details: { range, point: i <= points.length ? point : undefined },
      });
    }
  }
  return bounds.slice(1).map((max, i) => ({ min: bounds[i] as ShardKey, max }));
}

/**
 * Merges contiguous ranges given in key order into one. Returns `[first.min, last.max)`.
 * Throws `BAD_VALUE` when the list is empty or two neighbours are not contiguous.
 */
export function mergeRanges(ranges: readonly ChunkRange[]): ChunkRange {
  const first = ranges[0];
  const last = ranges[ranges.length - 1];
  if (first === undefined || last === undefined) throw new TesseraError('BAD_VALUE', 'Cannot merge an empty list of ranges.');
  for (let i = 1; i < ranges.length; i++) {
    if (!rangesAreContiguous(ranges[i - 1] as ChunkRange, ranges[i] as ChunkRange)) {
      throw new TesseraError(
        'BAD_VALUE',
        `Ranges to merge must be contiguous; there is a gap or overlap before ${chunkRangeToString(ranges[i] as ChunkRange)}.`,
        {
          details: { index: i },
        },
      );
    }
  }
  return { min: first.min, max: last.max };
}

/**
 * Checks that ranges cover `[keySpace.min, keySpace.max)` exactly: no gap, no overlap, each
 * range non-empty. Returns the ranges sorted by min. Throws `BAD_VALUE` naming the first
 * problem (`details.problem` is `'empty' | 'gap' | 'overlap' | 'start' | 'end' | 'invalid'`).
 */
export function validateRangeCoverage<R extends ChunkRange>(ranges: readonly R[], keySpace: ChunkRange): R[] {
  const sorted = [...ranges].sort((a, b) => compareShardKeys(a.min, b.min));
  const fail = (problem: string, message: string, range?: ChunkRange): never => {
    throw new TesseraError('BAD_VALUE', message, { details: { problem, ...(range ? { range } : {}) } });
  };
  const first = sorted[0];
  const last = sorted[sorted.length - 1];
  if (first === undefined || last === undefined) return fail('empty', 'No ranges cover the key space.');
  if (compareShardKeys(first.min, keySpace.min) !== 0)
    fail('start', `The first range starts at ${bound(first.min)}, not at ${bound(keySpace.min)}.`, first);
  for (let i = 0; i < sorted.length; i++) {
    const r = sorted[i] as R;
    if (compareShardKeys(r.min, r.max) >= 0) fail('invalid', `Range ${chunkRangeToString(r)} is empty or inverted.`, r);
    const next = sorted[i + 1];
    if (next === undefined) continue;
    const c = compareShardKeys(r.max, next.min);
    if (c < 0) fail('gap', `Gap between ${chunkRangeToString(r)} and ${chunkRangeToString(next)}.`, r);
    if (c > 0) fail('overlap', `Ranges ${chunkRangeToString(r)} and ${chunkRangeToString(next)} overlap.`, r);
  }
  if (compareShardKeys(last.max, keySpace.max) !== 0)
    fail('end', `The last range ends at ${bound(last.max)}, not at ${bound(keySpace.max)}.`, last);
  return sorted;
}

/** Returns a display form such as `[{ "$minKey": 1 }, 10)`. Throws nothing for supported values. */
export function chunkRangeToString(range: ChunkRange): string {
  return `[${bound(range.min)}, ${bound(range.max)})`;
}

function bound(key: ShardKey): string {
  return key.map((v) => toExtendedJson(v)).join(', ');
}
