import { describe, expect, it } from 'vitest';
import { type ValueObject, decodeKey, hashShardKeyValue, parseShardKeyPattern } from '@tessera/core';
import { defaultIndexName, indexEntriesOf, indexRangesForFilter } from './index-keys.js';

function entries(spec: Record<string, 1 | 'hashed'>, document: ValueObject): unknown[] {
  return indexEntriesOf(parseShardKeyPattern(spec), document).map((e) => e.values);
}

describe('index entries', () => {
  it.each([
    ['a missing field is null', { a: 1 }, { _id: 1 }, [[null]]],
    ['a scalar is one entry', { a: 1 }, { a: 5 }, [[5]]],
    ['an array gives one entry per distinct element', { a: 1 }, { a: [3, 1, 3] }, [[3], [1]]],
    ['an empty array gives null', { a: 1 }, { a: [] }, [[null]]],
    [
      'a dotted path expands arrays met on the way, null where the field is missing',
      { 'a.b': 1 },
      { a: [{ b: 1 }, { c: 2 }] },
      [[1], [null]],
    ],
    [
      'a compound index crosses the one array with the other fields',
      { a: 1, b: 1 },
      { a: [1, 2], b: 'x' },
      [
        [1, 'x'],
        [2, 'x'],
      ],
    ],
  ])('%s', (_name, spec, document, expected) => {
    expect(entries(spec as Record<string, 1>, document as ValueObject)).toEqual(expected);
  });

  it('a hashed field is hashed as the shard key hashing does', () => {
    expect(entries({ a: 'hashed' }, { a: 'x' })).toEqual([[hashShardKeyValue('x')]]);
  });

  it('arrays in two fields of one compound index are refused as parallel arrays', () => {
    expect(() => entries({ a: 1, b: 1 }, { a: [1], b: [2] })).toThrow(/cannot index parallel arrays/);
  });

  it('an array in a hashed field is refused', () => {
    expect(() => entries({ a: 'hashed' }, { a: [1] })).toThrow(/hashed/);
  });

  it('entries encode their values', () => {
    const [entry] = indexEntriesOf(parseShardKeyPattern({ a: 1 }), { a: 'x' });
    expect(decodeKey(entry!.key)).toEqual(['x']);
  });
});

describe('default names', () => {
  it('join each field with its kind, as MongoDB', () => {
    expect(defaultIndexName(parseShardKeyPattern({ a: 1, 'b.c': 'hashed' }))).toBe('a_1_b.c_hashed');
  });
});

describe('index ranges for a filter', () => {
  const pattern = parseShardKeyPattern({ a: 1 });
  it.each([
    ['no condition on the first field', { b: 1 }, false],
    ['an array operand', { a: [1, 2] }, false],
    ['a regex', { a: { $regex: 'x' } }, false],
    ['an $or', { $or: [{ a: 1 }, { a: 2 }] }, false],
    ['equality', { a: 1 }, true],
    ['$in', { a: { $in: [1, 2] } }, true],
    ['a bound', { a: { $gt: 1 } }, true],
    ['a condition inside a top-level $and', { $and: [{ a: 1 }] }, true],
  ])('%s narrows: %s', (_name, filter, narrows) => {
    expect(indexRangesForFilter(pattern, filter as ValueObject) !== undefined).toBe(narrows);
  });

  it('two bounds on one field keep one, so a multikey document matching through two elements is kept', () => {
    // { a: [6, 1] } matches { $gt: 5, $lt: 3 }; intersecting would give no range at all.
    const ranges = indexRangesForFilter(pattern, { a: { $gt: 5, $lt: 3 } })!;
    expect(ranges.length).toBeGreaterThan(0);
  });
});
