import { describe, expect, it } from 'vitest';
import { type ValueObject, parseCollation } from '@tessera/core';
import { runPipeline } from './run-pipeline.js';

const collation = parseCollation({ locale: 'en', strength: 2 })!;
const people: ValueObject[] = [
  { _id: 1, name: 'ann', n: 1 },
  { _id: 2, name: 'Bob', n: 2 },
  { _id: 3, name: 'ANN', n: 3 },
  { _id: 4, name: 'Ann', n: 4 },
  { _id: 5, name: 'bob', n: 5 },
  { _id: 6, n: 6 },
];

describe('$group and $sortByCount under a collation', () => {
  it('groups the keys the collation calls equal, each group keyed by its least key by bytes, whatever the input order', () => {
    const pipeline: ValueObject[] = [{ $group: { _id: '$name', total: { $sum: '$n' } } }, { $sort: { _id: 1 } }];
    const expected = [
      { _id: null, total: 6 },
      { _id: 'ANN', total: 8 },
      { _id: 'Bob', total: 7 },
    ];
    expect(runPipeline(people, pipeline, { collation })).toEqual(expected);
    expect(runPipeline([...people].reverse(), pipeline, { collation })).toEqual(expected);
    expect(runPipeline(people, pipeline)).toHaveLength(6);
  });

  it('compares embedded keys by the collation, and leaves the grouped documents as they were', () => {
    const grouped = runPipeline(
      people.slice(0, 5),
      [{ $group: { _id: { who: '$name' }, all: { $push: '$$ROOT' } } }, { $sort: { _id: 1 } }],
      {
        collation,
      },
    );
    expect(grouped.map((g) => g['_id'])).toEqual([{ who: 'ANN' }, { who: 'Bob' }]);
    expect((grouped[0]!['all'] as ValueObject[]).map((d) => d['_id'])).toEqual([1, 3, 4]);
    expect(grouped[0]!['all']).toEqual([people[0], people[2], people[3]]);
  });

  it('counts by the collation in $sortByCount', () => {
    expect(runPipeline(people.slice(0, 5), [{ $sortByCount: '$name' }], { collation })).toEqual([
      { _id: 'ANN', count: 3 },
      { _id: 'Bob', count: 2 },
    ]);
  });
});
