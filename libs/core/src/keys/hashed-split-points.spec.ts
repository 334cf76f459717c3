import { Long, MinKey } from 'bson';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compareValues } from '../values/compare-values.js';
import { hashedSplitPoints } from './hashed-split-points.js';
import { parseShardKeyPattern } from './shard-key-pattern.js';

const hashed = parseShardKeyPattern({ k: 'hashed' });
const hashOf = (point: readonly unknown[]) => (point[0] as Long).toBigInt();

describe('hashedSplitPoints', () => {
  it.each([
    { pattern: { k: 1 }, n: 8, why: 'a ranged key is not pre-split' },
    { pattern: { k: 1, h: 'hashed' }, n: 8, why: 'a hashed field after the first is not pre-split' },
    { pattern: { k: 'hashed' }, n: 1, why: 'one chunk needs no point' },
    { pattern: { k: 'hashed' }, n: 0, why: 'no chunk needs no point' },
  ])('answers no points when $why', ({ pattern, n }) => {
    expect(hashedSplitPoints(parseShardKeyPattern(pattern), n)).toEqual([]);
  });

  it('cuts the hash space into equal quarters for four chunks', () => {
    expect(hashedSplitPoints(hashed, 4).map(hashOf)).toEqual([-(2n ** 62n), 0n, 2n ** 62n]);
  });

  it('halves the hash space at zero for two chunks', () => {
    expect(hashedSplitPoints(hashed, 2)).toEqual([[Long.fromBigInt(0n)]]);
  });

  it('rounds a point that falls between two hashes toward the lowest hash', () => {
    // 2^64 / 3 is not an integer: the first point is -2^63 + floor(2^64 / 3).
    expect(hashedSplitPoints(hashed, 3).map(hashOf)).toEqual([-(2n ** 63n) + 2n ** 64n / 3n, -(2n ** 63n) + 2n ** 65n / 3n]);
  });

  it('fills the fields after the hashed prefix with MinKey', () => {
    const [point] = hashedSplitPoints(parseShardKeyPattern({ k: 'hashed', a: 1, b: 1 }), 2);
    expect(point).toEqual([Long.fromBigInt(0n), new MinKey(), new MinKey()]);
  });

  it('gives n - 1 strictly increasing points inside the hash space, evenly spaced within one hash', () => {
    fc.assert(
      fc.property(fc.integer({ min: 2, max: 2_000 }), (n) => {
        const points = hashedSplitPoints(hashed, n);
        expect(points).toHaveLength(n - 1);
        const hashes = points.map(hashOf);
        expect(hashes[0]!).toBeGreaterThan(-(2n ** 63n));
        expect(hashes.at(-1)!).toBeLessThan(2n ** 63n);
        const step = 2n ** 64n / BigInt(n);
        for (let i = 1; i < points.length; i++) {
          expect(compareValues(points[i - 1]![0]!, points[i]![0]!)).toBeLessThan(0);
          const gap = hashes[i]! - hashes[i - 1]!;
          expect(gap === step || gap === step + 1n).toBe(true);
        }
      }),
    );
  });
});
