import { MaxKey, MinKey } from 'bson';
import { describe, expect, it } from 'vitest';
import { TesseraError } from '../errors.js';
import type { ChunkRange } from './chunk-range.js';
import {
  chunkRangeToString,
  makeChunkRange,
  mergeRanges,
  rangeContainsKey,
  rangeContainsRange,
  rangesAreContiguous,
  rangesEqual,
  rangesOverlap,
  splitRange,
  validateRangeCoverage,
} from './chunk-range.js';

/** Builds `[min, max)` over a one-field integer key; `null` bounds stand for MinKey / MaxKey. */
function range(min: number | null, max: number | null): ChunkRange {
  return { min: [min === null ? new MinKey() : min], max: [max === null ? new MaxKey() : max] };
}

function problemOf(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    expect((error as TesseraError).code).toBe('BAD_VALUE');
    return (error as TesseraError).details?.['problem'];
  }
  throw new Error('expected BAD_VALUE');
}

describe('chunk ranges', () => {
  it('contain their min but not their max', () => {
    expect(rangeContainsKey(range(0, 10), [0])).toBe(true);
    expect(rangeContainsKey(range(0, 10), [9.99])).toBe(true);
    expect(rangeContainsKey(range(0, 10), [10])).toBe(false);
    expect(rangeContainsKey(range(null, null), ['anything'])).toBe(true);
  });

  it.each([
    { a: range(0, 10), b: range(5, 15), overlap: true },
    { a: range(0, 10), b: range(10, 15), overlap: false },
    { a: range(0, 10), b: range(-5, 0), overlap: false },
    { a: range(null, null), b: range(3, 4), overlap: true },
  ])('overlap is $overlap for $a.min-$a.max and $b.min-$b.max', ({ a, b, overlap }) => {
    expect(rangesOverlap(a, b)).toBe(overlap);
    expect(rangesOverlap(b, a)).toBe(overlap);
  });

  it('know contiguity, containment and equality', () => {
    expect(rangesAreContiguous(range(0, 10), range(10, 20))).toBe(true);
    expect(rangesAreContiguous(range(0, 10), range(11, 20))).toBe(false);
    expect(rangeContainsRange(range(null, 10), range(3, 10))).toBe(true);
    expect(rangeContainsRange(range(0, 10), range(3, 11))).toBe(false);
    expect(rangesEqual(range(1, 2), range(1.0, 2))).toBe(true);
  });

  it('refuse min >= max and mismatched arity with BAD_VALUE', () => {
    expect(() => makeChunkRange([5], [5])).toThrow(TesseraError);
    expect(() => makeChunkRange([5], [1])).toThrow(TesseraError);
    expect(() => makeChunkRange([1], [2, 3])).toThrow(TesseraError);
  });

  it('split into contiguous pieces at strictly increasing inner points', () => {
    expect(splitRange(range(0, 10), [[3], [7]])).toEqual([range(0, 3), range(3, 7), range(7, 10)]);
    expect(() => splitRange(range(0, 10), [[7], [3]])).toThrow(TesseraError);
    expect(() => splitRange(range(0, 10), [[0]])).toThrow(TesseraError);
    expect(() => splitRange(range(0, 10), [[10]])).toThrow(TesseraError);
    expect(() => splitRange(range(0, 10), [])).toThrow(TesseraError);
  });

  it('merge contiguous ranges and refuse gaps', () => {
    expect(mergeRanges([range(0, 3), range(3, 7), range(7, 10)])).toEqual(range(0, 10));
    expect(() => mergeRanges([range(0, 3), range(4, 7)])).toThrow(TesseraError);
    expect(() => mergeRanges([])).toThrow(TesseraError);
  });

  it('print with Extended JSON bounds', () => {
    expect(chunkRangeToString(range(null, 5))).toBe('[{"$minKey":1}, 5)');
  });
});

describe('validateRangeCoverage', () => {
  const space = range(null, null);

  it('accepts a full cover in any order and returns it sorted', () => {
    const sorted = validateRangeCoverage([range(5, null), range(null, 0), range(0, 5)], space);
    expect(sorted).toEqual([range(null, 0), range(0, 5), range(5, null)]);
  });

  it.each([
    { problem: 'gap', ranges: [range(null, 0), range(1, null)] },
    { problem: 'overlap', ranges: [range(null, 2), range(1, null)] },
    { problem: 'start', ranges: [range(0, null)] },
    { problem: 'end', ranges: [range(null, 0)] },
    { problem: 'empty', ranges: [] },
    { problem: 'invalid', ranges: [range(null, 3), range(3, 3), range(3, null)] },
  ])('reports a $problem', ({ problem, ranges }) => {
    expect(problemOf(() => validateRangeCoverage(ranges, space))).toBe(problem);
  });
});
