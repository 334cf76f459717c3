import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ValueObject, fromExtendedJsonObject, toExtendedJsonObject } from '@tessera/core';
import { checkPipeline, runPipeline } from '@tessera/query';
import type { ConfigClient } from '@tessera/protocol';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';
import { FAST_CONFIG_ENV, spreadChunks, waitForLeader } from './helpers.js';
import { RouterApi, onShardDatabase } from './router-api.js';
import { rootApi, startTestCluster } from './test-cluster.js';

/**
 * Aggregation on real processes: a collection ranged on `x` with one chunk on each of three
 * shards, pipelines answered through the router and checked against the same pipeline run over
 * all documents at once, as a single node would answer.
 */

let cluster: LocalCluster;
let dispose: () => Promise<void>;
let config: ConfigClient;
let api: RouterApi;

const NS = 'agg.orders';
const orders = Array.from({ length: 600 }, (_, i) => ({
  _id: i,
  x: i,
  customer: `c${i % 7}`,
  amount: (i * 37) % 101,
  items: ['pen', 'ink', 'pad'].slice(0, i % 4),
  ...(i % 10 === 0 ? {} : { rating: i % 5 }),
}));
const customers = Array.from({ length: 7 }, (_, i) => ({ _id: `c${i}`, name: `customer ${i}`, tier: i % 2 === 0 ? 'gold' : 'basic' }));

beforeAll(async () => {
  ({ cluster, dispose } = await startTestCluster({ shards: 3, routers: 1, env: FAST_CONFIG_ENV }));
  config = cluster.configClient();
  api = rootApi(cluster);
  await waitForLeader(config);
  await config.shardCollection({ ns: NS, key: { x: 1 } });
  await spreadChunks(config, NS, [200, 400]);
  expect((await api.call('POST', '/v1/agg/orders/insert', { documents: orders })).json).toMatchObject({ insertedCount: 600 });
  // The same documents hashed on _id over every shard, and unsharded on the primary shard.
  await config.shardCollection({ ns: 'agg.hashed', key: { _id: 'hashed' } });
  expect((await api.call('POST', '/v1/agg/hashed/insert', { documents: orders })).json).toMatchObject({ insertedCount: 600 });
  expect((await api.call('POST', '/v1/agg/plain/insert', { documents: orders })).json).toMatchObject({ insertedCount: 600 });
  expect((await api.call('POST', '/v1/agg/customers/insert', { documents: customers })).json).toMatchObject({ insertedCount: 7 });
});

afterAll(async () => {
  await dispose?.();
  await api?.close();
});

/** Every document an aggregate on `agg.<coll>` answers, following its cursor. */
async function aggregate(pipeline: unknown[], extra: Record<string, unknown> = {}, coll = 'orders'): Promise<unknown[]> {
  const first = await api.call('POST', `/v1/agg/${coll}/aggregate`, { pipeline, ...extra });
  if (first.status !== 200) throw new Error(`aggregate answered ${first.status}: ${JSON.stringify(first.json)}`);
  let { cursor } = first.json as { cursor: { id: string; firstBatch?: unknown[]; nextBatch?: unknown[] } };
  const documents = [...(cursor.firstBatch ?? [])];
  while (cursor.id !== '0') {
    ({ cursor } = (await api.call('POST', `/v1/cursors/${cursor.id}/next`, { batchSize: 50 })).json as typeof first.json as {
      cursor: typeof cursor;
    });
    documents.push(...(cursor.nextBatch ?? []));
  }
  return documents;
}

/** What one node holding every document answers. */
function reference(pipeline: unknown[], collections: Record<string, ValueObject[]> = {}): unknown[] {
  const all = orders.map((d) => fromExtendedJsonObject(d) as ValueObject);
  return runPipeline(all, checkPipeline(pipeline.map((s) => fromExtendedJsonObject(s))), {
    collection: (name) => collections[name] ?? [],
  }).map((d) => toExtendedJsonObject(d));
}

const unordered = (documents: unknown[]) => documents.map((d) => JSON.stringify(d)).sort();

describe('aggregate across three shards', () => {
  it.each([
    [
      'a $group with every mergeable accumulator',
      [
        {
          $group: {
            _id: '$customer',
            total: { $sum: '$amount' },
            n: { $count: {} },
            low: { $min: '$amount' },
            high: { $max: '$amount' },
            mean: { $avg: '$rating' },
          },
        },
        { $sort: { _id: 1 } },
      ],
    ],
    [
      'a $sort with $skip and $limit (top-k on each shard)',
      [{ $match: { amount: { $gte: 30 } } }, { $sort: { amount: -1, _id: 1 } }, { $skip: 15 }, { $limit: 40 }, { $project: { amount: 1 } }],
    ],
    [
      '$unwind, then a $group on the unwound field',
      [{ $unwind: '$items' }, { $group: { _id: '$items', n: { $sum: 1 } } }, { $sort: { _id: 1 } }],
    ],
    ['$count after a leading $match on the shard key', [{ $match: { x: { $gte: 150, $lt: 450 } } }, { $count: 'inRange' }]],
    [
      '$facet with $bucket and $sortByCount',
      [
        {
          $facet: {
            buckets: [{ $bucket: { groupBy: '$amount', boundaries: [0, 25, 50, 75, 101] } }],
            top: [{ $sortByCount: '$customer' }, { $sort: { count: -1, _id: 1 } }, { $limit: 3 }],
          },
        },
      ],
    ],
    [
      '$group with $first (merged whole on the router)',
      [{ $sort: { x: 1 } }, { $group: { _id: '$customer', first: { $first: '$x' }, all: { $push: '$x' } } }, { $sort: { _id: 1 } }],
    ],
    [
      '$group with $addToSet, $stdDevPop and $last after a $sort',
      [
        { $sort: { x: 1 } },
        {
          $group: {
            _id: { $mod: ['$x', 3] },
            ratings: { $addToSet: '$rating' },
            sd: { $stdDevPop: '$amount' },
            last: { $last: '$x' },
          },
        },
        { $project: { n: { $size: '$ratings' }, sd: { $round: ['$sd', 6] }, last: 1 } },
        { $sort: { _id: 1 } },
      ],
    ],
    [
      '$setWindowFields: a running total per customer',
      [
        {
          $setWindowFields: {
            partitionBy: '$customer',
            sortBy: { x: 1 },
            output: { running: { $sum: '$amount', window: { documents: ['unbounded', 'current'] } } },
          },
        },
        { $match: { x: { $lt: 60 } } },
        { $sort: { x: 1 } },
        { $project: { running: 1 } },
      ],
    ],
    [
      '$addFields with $switch and $cond, then $replaceRoot',
      [
        { $match: { amount: { $gt: 90 } } },
        {
          $addFields: {
            band: { $switch: { branches: [{ case: { $gte: ['$amount', 95] }, then: 'top' }], default: 'high' } },
            odd: { $cond: [{ $eq: [{ $mod: ['$x', 2] }, 1] }, true, false] },
          },
        },
        { $replaceRoot: { newRoot: { id: '$_id', band: '$band', odd: '$odd' } } },
        { $sort: { id: 1 } },
      ],
    ],
    ['$bucketAuto over a field', [{ $bucketAuto: { groupBy: '$amount', buckets: 4 } }]],
    [
      '$unwind with includeArrayIndex and preserveNullAndEmptyArrays',
      [
        { $unwind: { path: '$items', includeArrayIndex: 'i', preserveNullAndEmptyArrays: true } },
        { $group: { _id: '$i', n: { $sum: 1 } } },
        { $sort: { _id: 1 } },
      ],
    ],
    ['$sortByCount', [{ $sortByCount: '$rating' }, { $sort: { count: -1, _id: 1 } }]],
    ['$redact, then $count', [{ $redact: { $cond: [{ $gt: ['$amount', 50] }, '$$KEEP', '$$PRUNE'] } }, { $count: 'n' }]],
    [
      'string expressions in $project',
      [
        { $match: { x: { $lt: 20 } } },
        { $project: { label: { $concat: [{ $toUpper: '$customer' }, '-', { $toString: '$x' }] }, len: { $strLenCP: '$customer' } } },
        { $sort: { _id: 1 } },
      ],
    ],
    ['a $match with $expr', [{ $match: { $expr: { $gt: ['$amount', '$x'] } } }, { $count: 'n' }]],
    ['$skip and $limit after a $sort on the key', [{ $sort: { x: -1 } }, { $skip: 590 }, { $limit: 5 }, { $project: { x: 1 } }]],
    [
      '$set, $unset and $replaceWith',
      [
        { $match: { x: { $lt: 50 } } },
        { $set: { double: { $multiply: ['$amount', 2] } } },
        { $unset: ['items', 'rating'] },
        { $replaceWith: { id: '$_id', d: '$double' } },
        { $sort: { id: 1 } },
      ],
    ],
    [
      '$densify, then $fill',
      [
        { $match: { x: { $lt: 30, $ne: 7 } } },
        { $project: { _id: 0, x: 1, rating: 1 } },
        { $densify: { field: 'x', range: { step: 1, bounds: [0, 35] } } },
        { $fill: { sortBy: { x: 1 }, output: { rating: { method: 'locf' } } } },
        { $sort: { x: 1 } },
      ],
    ],
    ['$sample, counted', [{ $sample: { size: 5 } }, { $count: 'n' }]],
  ] as Array<[string, unknown[]]>)('answers %s as a single node would, ranged, hashed and unsharded', async (_, pipeline) => {
    const expected = reference(pipeline);
    for (const coll of ['orders', 'hashed', 'plain'])
      expect(await aggregate(pipeline, { cursor: { batchSize: 7 } }, coll), coll).toEqual(expected);
  });

  it('streams a pipeline without a merge through a cursor, in batches', async () => {
    const pipeline = [{ $match: { customer: 'c3' } }, { $set: { double: { $multiply: ['$amount', 2] } } }, { $unset: 'items' }];
    const first = await api.call('POST', '/v1/agg/orders/aggregate', { pipeline, cursor: { batchSize: 10 } });
    const { cursor } = first.json as { cursor: { id: string; firstBatch: unknown[] } };
    expect(cursor.firstBatch).toHaveLength(10);
    expect(cursor.id).not.toBe('0');
    expect(unordered(await aggregate(pipeline))).toEqual(unordered(reference(pipeline)));
  });

  it('answers exactly once per document while chunks move, orphans left behind included', async () => {
    const moving = 'agg.moving';
    await config.shardCollection({ ns: moving, key: { x: 1 } });
    await spreadChunks(config, moving, [1000, 2000]);
    const documents = Array.from({ length: 3000 }, (_, x) => ({ _id: x, x, tag: x % 2 === 0 ? 'even' : 'odd' }));
    expect((await api.call('POST', '/v1/agg/moving/insert', { documents })).json).toMatchObject({ insertedCount: 3000 });
    const sum = (3000 * 2999) / 2;
    const pipelines: Array<[unknown[], unknown[]]> = [
      [[{ $group: { _id: null, n: { $sum: 1 }, s: { $sum: '$x' } } }], [{ _id: null, n: 3000, s: sum }]],
      [[{ $match: { tag: 'even' } }, { $group: { _id: '$tag', n: { $count: {} } } }], [{ _id: 'even', n: 1500 }]],
      [[{ $project: { x: 1 } }, { $count: 'n' }], [{ n: 3000 }]],
    ];
    // Moves without waiting for range deletion: donors keep orphans for a while, which every
    // answer must leave out.
    let done = false;
    const mover = (async () => {
      try {
        for (const to of ['shard0', 'shard2', 'shard1', 'shard0']) await config.moveChunk({ ns: moving, find: { x: 1500 }, to });
      } finally {
        done = true;
      }
    })();
    const answers: Array<{ pipeline: number; answer: unknown[] }> = [];
    while (!done) {
      for (const [i, [pipeline]] of pipelines.entries()) answers.push({ pipeline: i, answer: await aggregate(pipeline, {}, 'moving') });
    }
    await mover;
    expect(answers.length).toBeGreaterThan(3);
    for (const { pipeline, answer } of answers) expect(answer, JSON.stringify(pipelines[pipeline]![0])).toEqual(pipelines[pipeline]![1]);
  });

  it('reads its own writes inside a transaction, at the snapshot, and refuses $merge there', async () => {
    const lsid = { id: { $uuid: randomUUID() } };
    const txn = { lsid, txnNumber: 1, autocommit: false };
    const count = [{ $match: { customer: 'c1' } }, { $count: 'n' }];
    const before = (await aggregate(count, {}, 'hashed')) as Array<{ n: number }>;
    const inserted = await api.call('POST', '/v1/agg/hashed/insert', {
      documents: [{ _id: 10_000, x: 10_000, customer: 'c1' }],
      ...txn,
      startTransaction: true,
    });
    expect(inserted.status, JSON.stringify(inserted.json)).toBe(200);
    const inside = await api.call('POST', '/v1/agg/hashed/aggregate', { pipeline: count, ...txn });
    expect(inside.json).toMatchObject({ cursor: { firstBatch: [{ n: before[0]!.n + 1 }] } });
    const merge = await api.call('POST', '/v1/agg/hashed/aggregate', { pipeline: [{ $merge: 'elsewhere' }], ...txn });
    expect(merge.json).toMatchObject({ code: 263, codeName: 'OperationNotSupportedInTransaction' });
    await api.call('POST', '/v1/admin/abortTransaction', txn);
    expect(await aggregate(count, {}, 'hashed')).toEqual(before);
  });

  it('explains the split: the shards part, the router part and the shards a leading $match targets', async () => {
    const grouped = await api.call('POST', '/v1/agg/orders/aggregate', {
      pipeline: [{ $group: { _id: '$customer', n: { $sum: 1 } } }],
      explain: true,
    });
    expect(grouped.json).toMatchObject({
      explain: {
        splitPipeline: {
          shardsPart: [{ $group: { _id: '$customer', n: { $sum: 1 } } }],
          mergerPart: [{ $group: { _id: '$_id', n: { $sum: '$n' } } }],
        },
        targetedShards: ['shard0', 'shard1', 'shard2'],
        mergeType: 'router',
      },
    });
    const targeted = await api.call('POST', '/v1/agg/orders/aggregate', {
      pipeline: [{ $match: { x: { $gte: 210, $lt: 300 } } }, { $group: { _id: null, n: { $sum: 1 } } }],
      explain: true,
    });
    expect(targeted.json).toMatchObject({ explain: { splitPipeline: null, targetedShards: ['shard1'], mergeType: 'shard' } });
    expect(await aggregate([{ $match: { x: { $gte: 210, $lt: 300 } } }, { $group: { _id: null, n: { $sum: 1 } } }])).toEqual([
      { _id: null, n: 90 },
    ]);
  });

  it('joins with $lookup from an unsharded collection and from the sharded one itself', async () => {
    const fromCustomers = [
      { $match: { x: { $lt: 20 } } },
      { $lookup: { from: 'customers', localField: 'customer', foreignField: '_id', as: 'who' } },
      { $sort: { x: 1 } },
    ];
    const docs = customers.map((c) => fromExtendedJsonObject(c) as ValueObject);
    expect(await aggregate(fromCustomers)).toEqual(reference(fromCustomers, { customers: docs }));
    const selfJoin = [
      { $match: { x: { $in: [5, 305, 505] } } },
      { $lookup: { from: 'orders', localField: 'amount', foreignField: 'amount', as: 'same', pipeline: [{ $project: { _id: 1 } }] } },
      { $sort: { x: 1 } },
    ];
    expect(await aggregate(selfJoin)).toEqual(reference(selfJoin, { orders: orders.map((d) => fromExtendedJsonObject(d) as ValueObject) }));
    // Arrays, empty arrays, missing and null local values against null and missing foreign ones:
    // the router reads only the products an $in of the local values reaches, and must join what a
    // read of the whole collection joins.
    const products = [{ _id: 1, sku: 'pen' }, { _id: 2, sku: 'ink' }, { _id: 3, sku: null }, { _id: 4 }, { _id: 5, sku: ['pad', 'pen'] }];
    expect((await api.call('POST', '/v1/agg/products/insert', { documents: products })).json).toMatchObject({ insertedCount: 5 });
    const byItems = [
      { $match: { x: { $lt: 12 } } },
      { $set: { first: { $arrayElemAt: ['$items', 0] } } },
      { $lookup: { from: 'products', localField: 'items', foreignField: 'sku', as: 'products' } },
      { $lookup: { from: 'products', localField: 'first', foreignField: 'sku', as: 'firstProduct' } },
      { $sort: { x: 1 } },
    ];
    expect(await aggregate(byItems)).toEqual(
      reference(byItems, { products: products.map((d) => fromExtendedJsonObject(d) as ValueObject) }),
    );
  });

  it('joins with $unionWith and $graphLookup, on every layout', async () => {
    const tiers = [
      { _id: 'gold', next: 'silver' },
      { _id: 'silver', next: 'bronze' },
      { _id: 'bronze', next: null },
      { _id: 'basic', next: 'bronze' },
    ];
    expect((await api.call('POST', '/v1/agg/tiers/insert', { documents: tiers })).json).toMatchObject({ insertedCount: 4 });
    const collections = {
      customers: customers.map((d) => fromExtendedJsonObject(d) as ValueObject),
      tiers: tiers.map((d) => fromExtendedJsonObject(d) as ValueObject),
    };
    const pipelines = [
      [
        { $match: { x: { $lt: 3 } } },
        { $project: { x: 1 } },
        { $unionWith: { coll: 'customers', pipeline: [{ $match: { tier: 'gold' } }, { $project: { name: 1 } }] } },
        { $sort: { _id: 1 } },
      ],
      [
        { $match: { x: { $lt: 8 } } },
        { $lookup: { from: 'customers', localField: 'customer', foreignField: '_id', as: 'who' } },
        { $set: { tier: { $arrayElemAt: ['$who.tier', 0] } } },
        {
          $graphLookup: {
            from: 'tiers',
            startWith: '$tier',
            connectFromField: 'next',
            connectToField: '_id',
            as: 'chain',
            depthField: 'd',
          },
        },
        { $project: { x: 1, chain: { $sortArray: { input: '$chain._id', sortBy: 1 } } } },
        { $sort: { x: 1 } },
      ],
    ];
    for (const pipeline of pipelines) {
      const expected = reference(pipeline, collections);
      expect((expected as unknown[]).length).toBeGreaterThan(2);
      for (const coll of ['orders', 'hashed', 'plain']) expect(await aggregate(pipeline, {}, coll), coll).toEqual(expected);
    }
  });

  it('writes the results with $merge, and answers the errors MongoDB answers', async () => {
    const totals = [{ $group: { _id: '$customer', total: { $sum: '$amount' } } }, { $merge: { into: 'totals', whenMatched: 'replace' } }];
    expect(await aggregate(totals)).toEqual([]);
    await aggregate([{ $match: { x: 0 } }, { $project: { _id: '$customer', note: 'first order' } }, { $merge: 'totals' }]);
    const written = await api.findAll('agg.totals', { sort: { _id: 1 } });
    const expected = reference([{ $group: { _id: '$customer', total: { $sum: '$amount' } } }, { $sort: { _id: 1 } }]) as Array<
      Record<string, unknown>
    >;
    expect(written).toEqual(expected.map((d) => (d['_id'] === 'c0' ? { ...d, note: 'first order' } : d)));

    const unknown = await api.call('POST', '/v1/agg/orders/aggregate', { pipeline: [{ $match: {} }, { $frobnicate: 1 }] });
    expect(unknown.status).toBe(400);
    expect(unknown.json).toMatchObject({
      code: 40324,
      codeName: 'Location40324',
      errmsg: "Unrecognized pipeline stage name: '$frobnicate'",
    });
    const notLast = await api.call('POST', '/v1/agg/orders/aggregate', { pipeline: [{ $merge: 'x' }, { $match: {} }] });
    expect(notLast.json).toMatchObject({ code: 40601 });
    const missing = await api.call('POST', '/v1/agg/nothing/aggregate', { pipeline: [{ $group: { _id: null, n: { $sum: 1 } } }] });
    expect(missing.json).toMatchObject({ cursor: { id: '0', firstBatch: [] } });
  });

  it('replaces a collection with $out at once, keeping its indexes, and leaves it whole when $out fails', async () => {
    const byCustomer = { $group: { _id: '$customer', total: { $sum: '$amount' } } };
    expect(await aggregate([byCustomer, { $out: 'summary' }])).toEqual([]);
    expect(await api.findAll('agg.summary', { sort: { _id: 1 } })).toEqual(reference([byCustomer, { $sort: { _id: 1 } }]));
    await api.call('POST', '/v1/agg/summary/indexes', { indexes: [{ key: { total: 1 }, name: 'total_1' }] });

    const big = [{ $match: { amount: { $gte: 90 } } }, { $project: { amount: 1 } }];
    await aggregate([...big, { $out: 'summary' }]);
    expect(await api.findAll('agg.summary', { sort: { _id: 1 } })).toEqual(reference([...big, { $sort: { _id: 1 } }]));
    const indexes = (await api.call('GET', '/v1/agg/summary/indexes')).json as { cursor: { firstBatch: Array<{ name: string }> } };
    expect(indexes.cursor.firstBatch.map((index) => index.name)).toEqual(['_id_', 'total_1']);

    // Two results with one _id: the insert into the temporary collection fails, the target stays.
    const failing = await api.call('POST', '/v1/agg/orders/aggregate', {
      pipeline: [{ $project: { _id: '$customer' } }, { $out: 'summary' }],
    });
    expect(failing.json).toMatchObject({ code: 11000 });
    expect(await api.findAll('agg.summary', {})).toHaveLength(reference(big).length);
    const temporary = [];
    for (const shard of ['shard0', 'shard1', 'shard2']) {
      temporary.push(
        ...(await onShardDatabase(
          cluster,
          shard,
          async (pool) => (await pool.query("SELECT ns FROM collections WHERE ns LIKE 'agg.tmp.%'")).rows,
        )),
      );
    }
    expect(temporary).toEqual([]);

    const sharded = await api.call('POST', '/v1/agg/orders/aggregate', { pipeline: [{ $out: 'hashed' }] });
    expect(sharded.json).toMatchObject({ code: 20, codeName: 'IllegalOperation' });
    const elsewhere = await api.call('POST', '/v1/agg/orders/aggregate', { pipeline: [{ $out: { db: 'other', coll: 'x' } }] });
    expect(elsewhere.json).toMatchObject({ code: 20 });
  });

  it('renames an unsharded collection, and refuses what MongoDB refuses', async () => {
    const rename = (body: Record<string, unknown>) => api.call('POST', '/v1/admin/renameCollection', body);
    await api.call('POST', '/v1/agg/drafts/insert', { documents: [{ _id: 1 }, { _id: 2 }] });
    await api.call('POST', '/v1/agg/final/insert', { documents: [{ _id: 9 }] });
    expect((await rename({ renameCollection: 'agg.drafts', to: 'agg.final' })).json).toMatchObject({
      code: 48,
      codeName: 'NamespaceExists',
    });
    expect((await rename({ renameCollection: 'agg.drafts', to: 'agg.final', dropTarget: true })).json).toMatchObject({ ok: 1 });
    expect(await api.findAll('agg.final', { sort: { _id: 1 } })).toEqual([{ _id: 1 }, { _id: 2 }]);
    expect(await api.findAll('agg.drafts', {})).toEqual([]);
    expect((await rename({ renameCollection: 'agg.drafts', to: 'agg.x' })).json).toMatchObject({ code: 26, codeName: 'NamespaceNotFound' });
    expect((await rename({ renameCollection: 'agg.hashed', to: 'agg.x' })).json).toMatchObject({ code: 20 });
    expect((await rename({ renameCollection: 'agg.final', to: 'other.final' })).json).toMatchObject({ code: 20 });
  });

  it('runs $merge with a pipeline whenMatched and let, and whenNotMatched "fail" and "discard"', async () => {
    const byCustomer = { $group: { _id: '$customer', total: { $sum: '$amount' } } };
    const totals = new Map((reference([byCustomer]) as Array<{ _id: string; total: number }>).map((d) => [d._id, d.total]));
    const board = async () =>
      new Map((await api.findAll('agg.board', {})).map((d) => [(d as { _id: string })._id, d as Record<string, unknown>]));
    await aggregate([byCustomer, { $merge: 'board' }]);
    await api.call('POST', '/v1/agg/board/delete', { deletes: [{ q: { _id: 'c6' }, limit: 1 }] });
    const addUp = [{ $set: { total: { $add: ['$total', '$$new.total'] }, runs: { $add: [{ $ifNull: ['$runs', 1] }, '$$step'] } } }];
    expect(await aggregate([byCustomer, { $merge: { into: 'board', whenMatched: addUp, let: { step: 1 } } }])).toEqual([]);
    let written = await board();
    expect(written.get('c0')).toEqual({ _id: 'c0', total: 2 * totals.get('c0')!, runs: 2 });
    // Not matched after a pipeline: the result is inserted as it is.
    expect(written.get('c6')).toEqual({ _id: 'c6', total: totals.get('c6') });

    await api.call('POST', '/v1/agg/board/delete', { deletes: [{ q: { _id: 'c6' }, limit: 1 }] });
    const strict = await api.call('POST', '/v1/agg/orders/aggregate', {
      pipeline: [byCustomer, { $sort: { _id: 1 } }, { $merge: { into: 'board', whenMatched: 'replace', whenNotMatched: 'fail' } }],
    });
    expect(strict.status).toBe(409);
    expect(strict.json).toMatchObject({ code: 13113, codeName: 'MergeStageNoMatchingDocument' });
    written = await board();
    expect(written.has('c6')).toBe(false);
    expect(written.get('c0')).toEqual({ _id: 'c0', total: totals.get('c0') });
    await aggregate([byCustomer, { $set: { seen: true } }, { $merge: { into: 'board', whenNotMatched: 'discard' } }]);
    written = await board();
    expect(written.has('c6')).toBe(false);
    expect(written.get('c1')).toMatchObject({ seen: true });

    const refused = async (merge: Record<string, unknown>) =>
      (await api.call('POST', '/v1/agg/orders/aggregate', { pipeline: [byCustomer, { $merge: { into: 'board', ...merge } }] })).json;
    expect(await refused({ whenMatched: 'fail', whenNotMatched: 'discard' })).toMatchObject({ code: 2 });
    expect(await refused({ whenMatched: 'merge', let: { a: 1 } })).toMatchObject({
      code: 2,
      errmsg: expect.stringMatching(/Cannot use 'let'/),
    });
    expect(await refused({ whenMatched: [{ $group: { _id: null } }] })).toMatchObject({ code: 9 });
  });
});
