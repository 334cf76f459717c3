import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConfigClient } from '@tessera/protocol';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';
import { FAST_CONFIG_ENV, waitForLeader } from './helpers.js';
import type { RouterApi } from './router-api.js';
import { rootApi, startTestCluster } from './test-cluster.js';

/**
 * Collation on real processes: a collection ranged on a string shard key split at "M", so
 * "Alice" and "ALICE" (below "M" in byte order) live on one shard and "alice" on the other,
 * and the same documents unsharded. A read under a collation must find all of them.
 */

let cluster: LocalCluster;
let dispose: () => Promise<void>;
let config: ConfigClient;
let api: RouterApi;

const people = [
  { _id: 1, name: 'Alice', code: 'item9', city: 'Zürich' },
  { _id: 2, name: 'ALICE', code: 'item100', city: 'zurich' },
  { _id: 3, name: 'alice', code: 'item10', city: 'ZURICH' },
  { _id: 4, name: 'bob', code: 'item2', city: 'Bern' },
  { _id: 5, name: 'Émile', code: 'item1', city: 'bern' },
  { _id: 6, name: 'zoe', code: 'item20', city: 'Genève' },
];
const STRENGTH_2 = { locale: 'en', strength: 2 };

beforeAll(async () => {
  ({ cluster, dispose } = await startTestCluster({ shards: 2, routers: 1, env: FAST_CONFIG_ENV }));
  config = cluster.configClient();
  api = rootApi(cluster);
  await waitForLeader(config);
  await config.shardCollection({ ns: 'col.people', key: { name: 1 } });
  const [chunk] = (await config.getChunks({ ns: 'col.people' })).chunks;
  const { collectionVersion } = await config.getChunks({ ns: 'col.people' });
  await config.commitSplit({
    ns: 'col.people',
    expectedCollectionVersion: collectionVersion,
    shard: chunk!.shard,
    range: chunk!.range,
    splitPoints: [['M']],
  });
  await config.moveChunk({ ns: 'col.people', find: { name: 'zzz' }, to: chunk!.shard === 'shard0' ? 'shard1' : 'shard0' });
  for (const coll of ['people', 'plain']) {
    expect((await api.call('POST', `/v1/col/${coll}/insert`, { documents: people })).json).toMatchObject({ insertedCount: 6 });
  }
  const placed = await config.getChunks({ ns: 'col.people' });
  expect(new Set(placed.chunks.map((c) => c.shard)).size).toBe(2);
});

afterAll(async () => {
  await dispose?.();
  await api?.close();
});

const names = (documents: unknown[]) => (documents as Array<{ name: string }>).map((d) => d.name);

describe.each(['people', 'plain'])('collation on %s', (coll) => {
  const ns = `col.${coll}`;

  it('finds what the collation calls equal, on every shard, and sorts as it orders', async () => {
    expect(names(await api.findAll(ns, { filter: { name: 'alice' } }))).toEqual(['alice']);
    const equal = await api.findAll(ns, { filter: { name: 'alice' }, sort: { _id: 1 }, collation: STRENGTH_2 });
    expect(names(equal)).toEqual(['Alice', 'ALICE', 'alice']);
    const byCode = await api.findAll(ns, { filter: {}, sort: { code: 1 }, collation: { locale: 'en', numericOrdering: true } });
    expect((byCode as Array<{ code: string }>).map((d) => d.code)).toEqual(['item1', 'item2', 'item9', 'item10', 'item20', 'item100']);
    const accents = await api.findAll(ns, { filter: { name: { $gte: 'e', $lt: 'f' } }, collation: { locale: 'en', strength: 1 } });
    expect(names(accents)).toEqual(['Émile']);
  });

  it('counts, takes distinct values and aggregates under the collation', async () => {
    expect((await api.call('POST', `/v1/col/${coll}/count`, { filter: { name: 'ALICE' }, collation: STRENGTH_2 })).json).toMatchObject({
      n: 3,
    });
    const cities = await api.call('POST', `/v1/col/${coll}/distinct`, { key: 'city', collation: { locale: 'de', strength: 1 } });
    expect((cities.json.values as string[]).length).toBe(3);
    const pipeline = [{ $match: { name: 'alice' } }, { $sort: { code: -1 } }, { $project: { _id: 0, code: 1 } }];
    const aggregated = await api.call('POST', `/v1/col/${coll}/aggregate`, {
      pipeline,
      collation: { locale: 'en', strength: 2, numericOrdering: true },
    });
    expect((aggregated.json.cursor as { firstBatch: unknown[] }).firstBatch).toEqual([
      { code: 'item100' },
      { code: 'item10' },
      { code: 'item9' },
    ]);
    const grouped = await api.call('POST', `/v1/col/${coll}/aggregate`, {
      pipeline: [{ $group: { _id: '$name', n: { $sum: 1 } } }, { $sort: { _id: 1 } }],
      collation: STRENGTH_2,
    });
    expect((grouped.json.cursor as { firstBatch: unknown[] }).firstBatch).toEqual([
      { _id: 'ALICE', n: 3 },
      { _id: 'bob', n: 1 },
      { _id: 'Émile', n: 1 },
      { _id: 'zoe', n: 1 },
    ]);
  });

  it('updates, deletes and findAndModifies what the collation matches, one document or many', async () => {
    const update = (statement: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
      api.call('POST', `/v1/col/${coll}/update`, { updates: [statement], ...extra });
    const many = await update({ q: { name: 'alice' }, u: { $set: { tag: 'a' } }, multi: true, collation: STRENGTH_2 });
    expect(many.json).toMatchObject({ matchedCount: 3, modifiedCount: 3 });
    // A string shard key under a collation: one document, found on whichever shard holds it.
    const one = await update({ q: { name: 'ALICE' }, u: { $inc: { n: 1 } }, collation: STRENGTH_2 });
    expect(one.json).toMatchObject({ matchedCount: 1, modifiedCount: 1 });
    expect(await api.findAll(ns, { filter: { n: 1 } })).toHaveLength(1);
    const modified = await api.call('POST', `/v1/col/${coll}/findAndModify`, {
      query: { name: 'alice' },
      sort: { code: 1 },
      update: { $set: { first: true } },
      new: true,
      collation: { locale: 'en', strength: 2, numericOrdering: true },
    });
    expect(modified.json.value).toMatchObject({ code: 'item9', first: true });
    const deleted = await api.call('POST', `/v1/col/${coll}/delete`, {
      deletes: [{ q: { name: 'EMILE' }, limit: 1, collation: { locale: 'fr', strength: 1 } }],
    });
    expect(deleted.json).toMatchObject({ deletedCount: 1 });
    const upsert = await update({ q: { name: 'nobody' }, u: { $set: { x: 1 } }, upsert: true, collation: STRENGTH_2 });
    if (coll === 'people') expect(upsert.json.writeErrors).toMatchObject([{ code: 61, codeName: 'ShardKeyNotFound' }]);
    else expect(upsert.json).toMatchObject({ upsertedCount: 1 });
  });

  it('reads let in $expr filters and update pipelines, in bulkWrite too', async () => {
    const byLet = await api.call('POST', `/v1/col/${coll}/update`, {
      updates: [{ q: { $expr: { $eq: ['$code', '$$code'] } }, u: [{ $set: { fromLet: '$$value' } }] }],
      let: { code: 'item2', value: 7 },
    });
    expect(byLet.json).toMatchObject({ matchedCount: 1, modifiedCount: 1 });
    expect(await api.findAll(ns, { filter: { fromLet: 7 } })).toMatchObject([{ name: 'bob' }]);
    const constants = await api.call('POST', `/v1/col/${coll}/update`, {
      updates: [
        { q: { name: 'zoe' }, u: [{ $set: { viaC: { $add: ['$$k', '$$base'] } } }], c: { k: 3 } },
        { q: { name: 'zoe' }, u: { $set: { viaC: 0 } }, c: { k: 3 } },
      ],
      let: { base: 10 },
    });
    expect(constants.json).toMatchObject({ modifiedCount: 1, writeErrors: [{ index: 1, code: 9 }] });
    expect(await api.findAll(ns, { filter: { viaC: 13 } })).toMatchObject([{ name: 'zoe' }]);
    const bulk = await api.call('POST', '/v1/admin/bulkWrite', {
      ops: [
        { update: 0, filter: { name: 'BOB' }, updateMods: [{ $set: { bulk: '$$mark' } }], collation: STRENGTH_2 },
        { delete: 0, filter: { $expr: { $eq: ['$fromLet', '$$value'] } } },
      ],
      nsInfo: [{ ns }],
      let: { mark: 'm', value: 7 },
    });
    expect(bulk.json).toMatchObject({ nMatched: 1, nModified: 1, nDeleted: 1 });
  });

  it('updates the array element the query matched with $, under the collation', async () => {
    await api.call('POST', `/v1/col/${coll}/insert`, {
      documents: [{ _id: 7, name: 'Mia', pets: ['Cat', 'dog', 'cat'], scores: [{ s: 1 }, { s: 5 }, { s: 9 }] }],
    });
    const update = (statement: Record<string, unknown>) => api.call('POST', `/v1/col/${coll}/update`, { updates: [statement] });
    expect((await update({ q: { name: 'Mia', 'scores.s': { $gt: 3 } }, u: { $set: { 'scores.$.hit': true } } })).json).toMatchObject({
      modifiedCount: 1,
    });
    expect(
      (await update({ q: { name: 'Mia', pets: 'CAT' }, u: { $set: { 'pets.$': 'lion' } }, collation: STRENGTH_2 })).json,
    ).toMatchObject({
      modifiedCount: 1,
    });
    expect(await api.findAll(ns, { filter: { _id: 7 } })).toMatchObject([
      { pets: ['lion', 'dog', 'cat'], scores: [{ s: 1 }, { s: 5, hit: true }, { s: 9 }] },
    ]);
    const unmatched = await update({ q: { name: 'Mia' }, u: { $set: { 'pets.$': 'x' } } });
    expect(unmatched.json.writeErrors).toMatchObject([
      { code: 2, errmsg: expect.stringMatching(/positional operator did not find the match/) },
    ]);
  });
});

describe('what collation refuses', () => {
  it('refuses a malformed collation, and an index with one, with MongoDB codes', async () => {
    expect((await api.call('POST', '/v1/col/people/find', { collation: { strength: 2 } })).json).toMatchObject({ code: 9 });
    expect((await api.call('POST', '/v1/col/people/find', { collation: { locale: 'en', strength: 9 } })).json).toMatchObject({ code: 2 });
    const index = await api.call('POST', '/v1/col/people/indexes', {
      indexes: [{ key: { city: 1 }, name: 'city_1', collation: STRENGTH_2 }],
    });
    expect(index.status).toBe(400);
    expect(index.json).toMatchObject({ code: 67, codeName: 'CannotCreateIndex' });
  });
});
