import { Long, MaxKey, MinKey, ObjectId } from 'bson';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  compareShardKeys,
  createInitialChunks,
  extractShardKey,
  hashShardKeyValue,
  parseShardKeyPattern,
  rangeContainsKey,
  RoutingTable,
} from '@tessera/core';
import type { ChunkRange, ShardKeyPattern, Value, ValueObject } from '@tessera/core';
import { parseFilter } from '../filter/parse-filter.js';
import { fullKeyRange, keyOfPointRange, keyRangesForFilter, pointRange } from './key-ranges.js';
import { targetShards } from './target-shards.js';

const single = parseShardKeyPattern({ a: 1 });
const compound = parseShardKeyPattern({ a: 1, b: 1 });
const hashed = parseShardKeyPattern({ a: 'hashed' });

describe('keyRangesForFilter', () => {
  it('equality on every key field gives the point range [k, [...k, MinKey])', () => {
    expect(keyRangesForFilter(compound, { a: 1, b: 'x', c: 3 })).toEqual([pointRange([1, 'x'])]);
  });

  it('$in on the first field of a compound key gives one prefix range per value', () => {
    expect(keyRangesForFilter(compound, { a: { $in: [2, 1] } })).toEqual([
      { min: [1, new MinKey()], max: [1, new MaxKey(), new MinKey()] },
      { min: [2, new MinKey()], max: [2, new MaxKey(), new MinKey()] },
    ]);
  });

  it('a range on the first field stays within its type bracket', () => {
    expect(keyRangesForFilter(single, { a: { $gte: 5, $lt: 10 } })).toEqual([{ min: [5], max: [10] }]);
    const [gt] = keyRangesForFilter(single, { a: { $gt: 5 } });
    expect(gt).toEqual({ min: [5, new MinKey()], max: [''] });
  });

  it('equality prefix and a range on the next field', () => {
    expect(keyRangesForFilter(compound, { a: 1, b: { $lte: 4 } })).toEqual([{ min: [1, NaN], max: [1, 4, new MinKey()] }]);
  });

  it('$or unions and $and intersects', () => {
    expect(keyRangesForFilter(single, { $or: [{ a: 1 }, { a: 3 }] })).toEqual([pointRange([1]), pointRange([3])]);
    expect(keyRangesForFilter(single, { $and: [{ a: { $gte: 1 } }, { a: { $lt: 3 } }] })).toEqual([{ min: [1], max: [3] }]);
    expect(keyRangesForFilter(single, { a: { $gt: 3 }, $and: [{ a: { $lt: 2 } }] })).toEqual([]);
  });

  it.each<[string, ShardKeyPattern, unknown]>([
    ['no condition on the key', single, { b: 1 }],
    ['a condition only on the second field', compound, { b: 1 }],
    ['$ne', single, { a: { $ne: 1 } }],
    ['$nor', single, { $nor: [{ a: 1 }] }],
    ['a regex', single, { a: /x/ }],
    ['$or with a branch that does not constrain the key', single, { $or: [{ a: 1 }, { b: 2 }] }],
    ['a range on a hashed field', hashed, { a: { $gt: 5 } }],
  ])('%s gives the whole key space', (_name, pattern, filter) => {
    expect(keyRangesForFilter(pattern, filter)).toEqual([fullKeyRange(pattern)]);
  });

  it('hashes equality and $in values on a hashed field', () => {
    const ranges = keyRangesForFilter(hashed, { a: { $in: ['x', 5] } });
    const expected = [hashShardKeyValue('x'), hashShardKeyValue(5)]
      .map((h) => pointRange([h]))
      .sort((p, q) => compareShardKeys(p.min, q.min));
    expect(ranges).toEqual(expected);
  });

  it('$in [] matches nothing', () => {
    expect(keyRangesForFilter(single, { a: { $in: [] } })).toEqual([]);
  });
});

describe('keyOfPointRange', () => {
  it('answers the key of a point range of the pattern arity, and nothing for any other range', () => {
    expect(keyOfPointRange(compound, pointRange([1, 'x']))).toEqual([1, 'x']);
    expect(keyOfPointRange(compound, pointRange([1]))).toBeUndefined();
    expect(keyOfPointRange(single, { min: [1], max: [2] })).toBeUndefined();
    expect(keyOfPointRange(single, { min: [1], max: [2, new MinKey()] })).toBeUndefined();
    expect(keyOfPointRange(compound, keyRangesForFilter(compound, { a: 1 })[0]!)).toBeUndefined();
  });
});

describe('targetShards', () => {
  const table = RoutingTable.fromChunks(
    createInitialChunks({
      generation: { epoch: '65a000000000000000000001', timestamp: { t: 1, i: 0 } },
      keySpace: fullKeyRange(single),
      splitPoints: [[10], [20]],
      shards: ['s0', 's1', 's2'],
      at: { t: 1, i: 0 },
    }),
  );

  it.each<[string, unknown, string[], boolean]>([
    ['equality goes to one shard', { a: 15 }, ['s1'], false],
    ['equality on a chunk boundary goes to the chunk that starts there', { a: 20 }, ['s2'], false],
    ['$lte a boundary includes the chunk that holds it', { a: { $gte: 12, $lte: 20 } }, ['s1', 's2'], false],
    ['$lt a boundary stops before it', { a: { $gte: 12, $lt: 20 } }, ['s1'], false],
    ['no key condition goes everywhere', { b: 1 }, ['s0', 's1', 's2'], true],
    ['an impossible filter goes nowhere', { a: { $in: [] } }, [], false],
  ])('%s', (_name, filter, shards, broadcast) => {
    const targets = targetShards(table, single, filter);
    expect(targets.shards).toEqual(shards);
    expect(targets.broadcast).toBe(broadcast);
  });
});

describe('keyRangesForFilter never misses a matching document (property)', () => {
  // A small pool, so that filters and documents often meet on the same values (and their bounds).
  const scalar: fc.Arbitrary<Value> = fc.constantFrom<Value>(
    -1,
    0,
    1,
    1.5,
    Long.fromNumber(1),
    2n,
    2 ** 60,
    NaN,
    -Infinity,
    '',
    'a',
    'b',
    null,
    false,
    true,
    new Date(0),
    new ObjectId('000000000000000000000001'),
    { x: 1 },
    {},
  );
  const field = fc.constantFrom('a', 'a', 'b', 'c', 'x.y');
  const condition: fc.Arbitrary<Value> = fc.oneof(
    scalar,
    scalar.map((v) => ({ $eq: v })),
    fc.array(scalar, { maxLength: 3 }).map((vs) => ({ $in: vs })),
    fc.array(scalar, { maxLength: 2 }).map((vs) => ({ $nin: vs })),
    fc.tuple(fc.constantFrom('$gt', '$gte', '$lt', '$lte'), scalar).map(([op, v]) => ({ [op]: v })),
    fc.tuple(scalar, scalar).map(([lo, hi]) => ({ $gte: lo, $lt: hi })),
    scalar.map((v) => ({ $ne: v })),
    fc.boolean().map((b) => ({ $exists: b })),
    fc.constant<Value>({ $gte: new MinKey() }),
  );
  const leaf = fc.dictionary(field, condition, { minKeys: 1, maxKeys: 2 });
  const { filter } = fc.letrec<{ filter: ValueObject }>((tie) => ({
    filter: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      leaf,
      fc
        .tuple(fc.constantFrom('$and', '$or', '$nor'), fc.array(tie('filter'), { minLength: 1, maxLength: 3 }))
        .map(([op, fs]) => ({ [op]: fs })),
      fc.tuple(leaf, fc.array(tie('filter'), { minLength: 1, maxLength: 2 })).map(([l, fs]) => ({ ...l, $or: fs })),
    ),
  }));
  const maybe = fc.option(scalar, { nil: undefined, freq: 8 });
  const document = fc.record({ a: maybe, b: maybe, c: maybe, y: maybe }).map(({ a, b, c, y }) => {
    const doc: Record<string, Value> = {};
    if (a !== undefined) doc['a'] = a;
    if (b !== undefined) doc['b'] = b;
    if (c !== undefined) doc['c'] = c;
    if (y !== undefined) doc['x'] = { y };
    return doc;
  });
  const patterns = ['a:1', 'a:1,b:1', 'a:hashed', 'a:1,b:hashed', 'b:1,x.y:1', 'a:1,b:1,c:1'].map((spec) =>
    parseShardKeyPattern(
      Object.fromEntries(
        spec
          .split(',')
          .map((f) => f.split(':'))
          .map(([k, v]) => [k, v === 'hashed' ? 'hashed' : 1]),
      ),
    ),
  );

  it('every matching document has its shard key inside a returned range', () => {
    fc.assert(
      fc.property(fc.constantFrom(...patterns), filter, fc.array(document, { minLength: 1, maxLength: 8 }), (pattern, f, docs) => {
        const ranges = keyRangesForFilter(pattern, f);
        const compiled = parseFilter(f);
        expectSortedDisjointInside(pattern, ranges);
        for (const doc of docs) {
          if (!compiled.matches(doc)) continue;
          const key = extractShardKey(pattern, doc);
          expect(
            ranges.some((r) => rangeContainsKey(r, key)),
            `key ${String(key)} of a matching document`,
          ).toBe(true);
        }
      }),
      { numRuns: 1000 },
    );
  });

  it('a point query takes a shortcut that answers what the interval path answers', () => {
    // Under `$and` the same filter goes through the intervals.
    fc.assert(
      fc.property(fc.constantFrom(...patterns), fc.oneof(leaf, filter), (pattern, f) => {
        expect(keyRangesForFilter(pattern, f)).toEqual(keyRangesForFilter(pattern, { $and: [f] }));
      }),
      { numRuns: 2000 },
    );
  });
});

function expectSortedDisjointInside(pattern: ShardKeyPattern, ranges: readonly ChunkRange[]): void {
  const space = fullKeyRange(pattern);
  ranges.forEach((r, i) => {
    expect(compareShardKeys(r.min, r.max)).toBe(-1);
    expect(compareShardKeys(space.min, r.min)).toBeLessThanOrEqual(0);
    expect(compareShardKeys(r.max, space.max)).toBeLessThanOrEqual(0);
    const next = ranges[i + 1];
    if (next) expect(compareShardKeys(r.max, next.min)).toBe(-1);
  });
}
