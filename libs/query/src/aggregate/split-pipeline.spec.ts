import { describe, expect, it } from 'vitest';
import { compareValues, type Value, type ValueObject } from '@tessera/core';
import { thrownBy } from '../../../../test/errors.js';
import { parseFilter } from '../filter/parse-filter.js';
import { compileSort } from '../sort/sort.js';
import { checkPipeline, runPipeline } from './run-pipeline.js';
import { splitPipeline } from './split-pipeline.js';

/** A seeded generator, so a failing case can be replayed. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state * 1664525 + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

function documents(count: number, next: () => number): ValueObject[] {
  const colors = ['red', 'green', 'blue'];
  return Array.from({ length: count }, (_, i) => {
    const document: Record<string, Value> = {
      _id: i,
      x: Math.floor(next() * 1000),
      color: colors[Math.floor(next() * 3)]!,
      tags: ['a', 'b', 'c'].slice(0, Math.floor(next() * 4)),
    };
    if (next() < 0.8) document['n'] = Math.floor(next() * 50);
    if (next() < 0.1) document['n'] = 'not a number';
    return document;
  });
}

/** Runs a split pipeline as the cluster does: each shard its part over its matching documents, the router the merge. */
function runSplit(pipeline: ValueObject[], shards: ValueObject[][]): ValueObject[] {
  const split = splitPipeline(checkPipeline(pipeline), shards.length === 1);
  const matches = parseFilter(split.filter).matches;
  const partials = shards.map((owned) => runPipeline(owned.filter(matches), split.shardsPart));
  const merged = split.mergeSort === undefined ? partials.flat() : mergeSorted(partials, compileSort(split.mergeSort));
  return runPipeline(merged, split.mergerPart);
}

function mergeSorted(streams: ValueObject[][], compare: (a: ValueObject, b: ValueObject) => number): ValueObject[] {
  const positions = streams.map(() => 0);
  const out: ValueObject[] = [];
  for (;;) {
    let best = -1;
    streams.forEach((stream, s) => {
      const head = stream[positions[s]!];
      if (head !== undefined && (best === -1 || compare(head, streams[best]![positions[best]!]!) < 0)) best = s;
    });
    if (best === -1) return out;
    out.push(streams[best]![positions[best]!++]!);
  }
}

/** Results as a multiset, for pipelines whose output order MongoDB does not define. */
function unordered(results: ValueObject[]): ValueObject[] {
  return [...results].sort((a, b) => compareValues(a, b));
}

const PIPELINES: Array<{ name: string; pipeline: ValueObject[]; ordered: boolean }> = [
  { name: 'match and project', pipeline: [{ $match: { x: { $gte: 300 } } }, { $project: { x: 1, color: 1 } }], ordered: false },
  {
    name: 'group with every mergeable accumulator',
    pipeline: [
      { $match: { color: { $ne: 'blue' } } },
      {
        $group: {
          _id: '$color',
          total: { $sum: '$n' },
          docs: { $count: {} },
          low: { $min: '$x' },
          high: { $max: '$x' },
          mean: { $avg: '$n' },
          all: { $push: '$_id' },
          kinds: { $addToSet: '$n' },
        },
      },
      {
        $project: {
          _id: 1,
          total: 1,
          docs: 1,
          low: 1,
          high: 1,
          mean: 1,
          all: { $sortArray: { input: '$all', sortBy: 1 } },
          kinds: { $size: '$kinds' },
        },
      },
    ],
    ordered: false,
  },
  { name: 'group by null, then sort', pipeline: [{ $group: { _id: null, mean: { $avg: '$x' }, n: { $sum: 1 } } }], ordered: true },
  {
    name: 'group with $first stays whole on the router',
    pipeline: [{ $sort: { x: 1, _id: 1 } }, { $group: { _id: '$color', first: { $first: '$x' } } }, { $sort: { _id: 1 } }],
    ordered: true,
  },
  { name: 'sort and limit (top-k)', pipeline: [{ $sort: { x: -1, _id: 1 } }, { $limit: 7 }], ordered: true },
  { name: 'sort, skip and limit', pipeline: [{ $sort: { n: 1, _id: -1 } }, { $skip: 5 }, { $limit: 10 }], ordered: true },
  {
    name: 'unwind then group',
    pipeline: [{ $unwind: '$tags' }, { $group: { _id: '$tags', n: { $sum: 1 } } }, { $sort: { _id: 1 } }],
    ordered: true,
  },
  { name: 'count', pipeline: [{ $match: { n: { $lt: 20 } } }, { $count: 'small' }], ordered: true },
  { name: 'limit before a sort', pipeline: [{ $limit: 30 }, { $count: 'n' }], ordered: true },
  {
    name: 'facet and bucket on the router',
    pipeline: [
      { $facet: { byColor: [{ $sortByCount: '$color' }], buckets: [{ $bucket: { groupBy: '$x', boundaries: [0, 250, 500, 1000] } }] } },
    ],
    ordered: true,
  },
  {
    name: '$expr in a later $match',
    pipeline: [
      { $match: { $expr: { $gt: ['$x', { $multiply: [10, { $convert: { input: '$n', to: 'int', onError: 0, onNull: 0 } }] }] } } },
      { $sort: { _id: 1 } },
    ],
    ordered: true,
  },
];

describe('pipeline splitting', () => {
  for (const seed of [1, 2, 3]) {
    for (const { name, pipeline, ordered } of PIPELINES) {
      it(`${name}: split over 3 shards gives what one run over all gives (seed ${seed})`, () => {
        const next = random(seed);
        const all = documents(200, next);
        const shards: ValueObject[][] = [[], [], []];
        for (const document of all) shards[Math.floor(next() * 3)]!.push(document);
        const whole = runPipeline(all, checkPipeline(pipeline));
        const split = runSplit(pipeline, shards);
        expect(ordered ? split : unordered(split)).toEqual(ordered ? whole : unordered(whole));
        expect(runSplit(pipeline, [all])).toEqual(whole);
      });
    }
  }

  it('pushes the leading $match into the filter, per-document stages and a partial $group to the shards', () => {
    const split = splitPipeline([
      { $match: { a: 1 } },
      { $match: { b: 2 } },
      { $set: { c: 1 } },
      { $group: { _id: '$k', n: { $sum: 1 }, m: { $avg: '$v' } } },
      { $limit: 3 },
    ]);
    expect(split.filter).toEqual({ $and: [{ a: 1 }, { b: 2 }] });
    expect(split.shardsPart).toEqual([
      { $set: { c: 1 } },
      { $group: { _id: '$k', n: { $sum: 1 }, m: { $sum: '$v' }, m_count: { $sum: { $cond: [{ $isNumber: '$v' }, 1, 0] } } } },
    ]);
    expect(split.mergerPart[0]).toEqual({ $group: { _id: '$_id', n: { $sum: '$n' }, m: { $sum: '$m' }, m_count: { $sum: '$m_count' } } });
    expect(split.mergerPart.at(-1)).toEqual({ $limit: 3 });
  });

  it('gives the shards a $sort with the limit after it, and the router the merge order', () => {
    const split = splitPipeline([{ $sort: { x: 1 } }, { $skip: 2 }, { $limit: 3 }, { $project: { x: 1 } }]);
    expect(split.shardsPart).toEqual([{ $sort: { x: 1 } }, { $limit: 5 }]);
    expect(split.mergeSort).toEqual({ x: 1 });
    expect(split.mergerPart).toEqual([{ $skip: 2 }, { $limit: 3 }, { $project: { x: 1 } }]);
  });

  it('takes a leading $match with $expr as the filter, and keeps stages reading other collections on the router', () => {
    const split = splitPipeline(
      [{ $match: { $expr: { $eq: ['$a', '$b'] } } }, { $lookup: { from: 'other', localField: 'a', foreignField: 'b', as: 'j' } }],
      true,
    );
    expect(split.filter).toEqual({ $expr: { $eq: ['$a', '$b'] } });
    expect(split.shardsPart).toEqual([]);
    expect(split.mergerPart).toEqual([{ $lookup: { from: 'other', localField: 'a', foreignField: 'b', as: 'j' } }]);
  });
});

describe('pipeline checks', () => {
  it("refuses what MongoDB's parser refuses, with its codes", () => {
    expect(thrownBy(() => checkPipeline({ $match: {} }))).toMatchObject({ code: 'FAILED_TO_PARSE' });
    expect(thrownBy(() => checkPipeline([{ $match: {}, $limit: 1 }]))).toMatchObject({ code: 'PIPELINE_STAGE_SHAPE' });
    expect(thrownBy(() => checkPipeline([{ $bogus: {} }]))).toMatchObject({
      code: 'UNRECOGNIZED_PIPELINE_STAGE',
      message: "Unrecognized pipeline stage name: '$bogus'",
      details: { field: 'pipeline.0' },
    });
    expect(thrownBy(() => checkPipeline([{ $out: 'x' }, { $match: {} }]))).toMatchObject({ code: 'STAGE_NOT_LAST' });
    expect(thrownBy(() => checkPipeline([{ $count: '$n' }]))).toMatchObject({
      code: 'BAD_VALUE',
      message: 'the count field cannot be a $-prefixed path',
    });
    expect(thrownBy(() => checkPipeline([{ $documents: [] }]))).toMatchObject({ code: 'UNRECOGNIZED_PIPELINE_STAGE' });
  });

  it('reports an expression that fails as BAD_VALUE with the reason', () => {
    expect(thrownBy(() => runPipeline([{ _id: 1 }], [{ $project: { a: { $nosuch: 1 } } }]))).toMatchObject({ code: 'BAD_VALUE' });
  });

  it('gives each output of a join its own copy of the joined document', () => {
    const customers = [{ _id: 'c', name: 'n' }];
    const joined = runPipeline(
      [
        { _id: 1, c: 'c' },
        { _id: 2, c: 'c' },
      ],
      [
        { $lookup: { from: 'customers', localField: 'c', foreignField: '_id', as: 'who' } },
        { $unwind: '$who' },
        { $set: { 'who.name': { $concat: ['$who.name', '-', { $toString: '$_id' }] } } },
      ],
      { collection: () => customers },
    );
    expect(joined.map((d) => (d['who'] as ValueObject)['name'])).toEqual(['n-1', 'n-2']);
    expect(customers).toEqual([{ _id: 'c', name: 'n' }]);
  });

  it("runs a $lookup's pipeline over the documents its localField/foreignField matched, with its let, as MongoDB 5.0", () => {
    const orders: ValueObject[] = [
      { _id: 1, sku: 'pen', qty: 2 },
      { _id: 2, sku: 'ink', qty: 9 },
    ];
    const stock: ValueObject[] = [
      { _id: 'a', sku: 'pen', left: 1 },
      { _id: 'b', sku: 'pen', left: 5 },
      { _id: 'c', sku: 'ink', left: 20 },
      { _id: 'd', sku: 'pad', left: 50 },
    ];
    const joined = runPipeline(
      orders,
      [
        {
          $lookup: {
            from: 'stock',
            localField: 'sku',
            foreignField: 'sku',
            let: { need: '$qty' },
            pipeline: [{ $match: { $expr: { $gte: ['$left', '$$need'] } } }, { $project: { _id: 1 } }],
            as: 'enough',
          },
        },
      ],
      { collection: () => stock },
    );
    expect(joined.map((d) => d['enough'])).toEqual([[{ _id: 'b' }], [{ _id: 'c' }]]);
  });

  it('matches and sorts as find does (type brackets, not JavaScript order)', () => {
    const mixed: ValueObject[] = [{ _id: 1, v: 'b' }, { _id: 2, v: 10 }, { _id: 3, v: null }, { _id: 4, v: [5, 20] }, { _id: 5 }];
    expect(runPipeline(mixed, [{ $sort: { v: 1, _id: 1 } }]).map((d) => d['_id'])).toEqual([3, 5, 4, 2, 1]);
    expect(runPipeline(mixed, [{ $match: { v: { $gt: 6 } } }]).map((d) => d['_id'])).toEqual([2, 4]);
  });
});
