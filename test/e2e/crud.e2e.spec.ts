import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ValueObject, fromExtendedJsonObject, toExtendedJsonObject } from '@tessera/core';
import { compileSort, parseFilter } from '@tessera/query';
import { type ConfigClient, ShardClient } from '@tessera/protocol';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';
import { FAST_CONFIG_ENV, controlPlane, spreadChunks, waitForLeader } from './helpers.js';
import { RouterApi, storedCount } from './router-api.js';
import { rootApi, startTestCluster } from './test-cluster.js';

let cluster: LocalCluster;
let dispose: () => Promise<void>;
let config: ConfigClient;
let routerApi: RouterApi;

beforeAll(async () => {
  ({ cluster, dispose } = await startTestCluster({ shards: 3, routers: 1, env: FAST_CONFIG_ENV }));
  config = cluster.configClient();
  routerApi = rootApi(cluster);
  await waitForLeader(config);
});

afterAll(async () => {
  await dispose?.();
  await routerApi?.close();
});

const api = (method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', path: string, body?: unknown) => routerApi.call(method, path, body);
const findAll = (ns: string, query: Record<string, unknown>) => routerApi.findAll(ns, query);

/** The answer a single node would give: filter, sort, skip and limit over all documents. */
function reference(
  documents: unknown[],
  query: { filter?: Record<string, unknown>; sort?: Record<string, unknown>; skip?: number; limit?: number },
): unknown[] {
  const filter = parseFilter(fromExtendedJsonObject(query.filter ?? {}));
  let matched = documents.map((d) => fromExtendedJsonObject(d) as ValueObject).filter((d) => filter.matches(d));
  if (query.sort) matched = matched.sort(compileSort(fromExtendedJsonObject(query.sort)));
  matched = matched.slice(query.skip ?? 0, query.limit === undefined ? undefined : (query.skip ?? 0) + query.limit);
  return matched.map((d) => toExtendedJsonObject(d));
}

const shardCount = (shard: string, ns: string) => storedCount(cluster, shard, ns);

const rangedDocs = Array.from({ length: 300 }, (_, i) => ({ _id: i, x: i, even: i % 2 === 0, tag: `t${i % 5}`, y: (i * 37) % 101 }));

describe('CRUD on a ranged collection spread over three shards', () => {
  beforeAll(async () => {
    await config.shardCollection({ ns: 'shop.ranged', key: { x: 1 } });
    await spreadChunks(config, 'shop.ranged', [100, 200]);
    const inserted = await api('POST', '/v1/shop/ranged/insert', { documents: rangedDocs });
    expect(inserted.json).toMatchObject({ insertedCount: 300, writeErrors: [] });
  });

  it('places each document on the shard owning its chunk', async () => {
    expect([
      await shardCount('shard0', 'shop.ranged'),
      await shardCount('shard1', 'shop.ranged'),
      await shardCount('shard2', 'shop.ranged'),
    ]).toEqual([100, 100, 100]);
  });

  it.each([
    [
      'a range on the shard key, sorted, skipped and limited',
      { filter: { x: { $gte: 50, $lt: 250 } }, sort: { x: -1 }, skip: 10, limit: 20 },
    ],
    ['a scatter-gather on another field, sorted by a third', { filter: { even: true, tag: { $in: ['t1', 't3'] } }, sort: { y: 1, x: 1 } }],
    ['a scatter-gather with skip and limit across shards', { filter: {}, sort: { y: -1, x: 1 }, skip: 37, limit: 101 }],
    ['a point read by shard key', { filter: { x: 123 } }],
  ] as Array<[string, { filter: Record<string, unknown>; sort?: Record<string, unknown>; skip?: number; limit?: number }]>)(
    'answers %s exactly as a single node would',
    async (_, query) => {
      const found = await findAll('shop.ranged', { ...query, batchSize: 17 });
      const expected = reference(rangedDocs, query);
      if (query.sort) expect(found).toEqual(expected);
      else expect(found.map((d) => JSON.stringify(d)).sort()).toEqual(expected.map((d) => JSON.stringify(d)).sort());
    },
  );

  it('counts and lists distinct values across shards', async () => {
    expect((await api('POST', '/v1/shop/ranged/count', { filter: { even: true } })).json).toMatchObject({ n: 150 });
    expect((await api('POST', '/v1/shop/ranged/distinct', { key: 'tag', filter: { x: { $lt: 10 } } })).json).toMatchObject({
      values: ['t0', 't1', 't2', 't3', 't4'],
    });
  });

  it('updates many across shards and one by shard key, and deletes', async () => {
    const many = await api('POST', '/v1/shop/ranged/update', { updates: [{ q: { tag: 't4' }, u: { $inc: { y: 1000 } }, multi: true }] });
    expect(many.json).toMatchObject({ matchedCount: 60, modifiedCount: 60 });
    const one = await api('POST', '/v1/shop/ranged/update', { updates: [{ q: { x: 7 }, u: { $set: { touched: true } } }] });
    expect(one.json).toMatchObject({ matchedCount: 1, modifiedCount: 1 });
    const removed = await api('POST', '/v1/shop/ranged/delete', { deletes: [{ q: { x: { $gte: 290 } }, limit: 0 }] });
    expect(removed.json).toMatchObject({ deletedCount: 10 });
    expect((await api('POST', '/v1/shop/ranged/count', {})).json).toMatchObject({ n: 290 });
  });

  it('serves findAndModify by shard key', async () => {
    const answer = await api('POST', '/v1/shop/ranged/findAndModify', { query: { x: 5 }, update: { $set: { fam: 1 } }, new: true });
    expect(answer.json).toMatchObject({ value: { _id: 5, x: 5, fam: 1 } });
  });

  it('runs update pipelines in update and findAndModify, across shards, and refuses a stage MongoDB refuses', async () => {
    const updated = await api('POST', '/v1/shop/ranged/update', {
      updates: [{ q: { x: { $in: [10, 150, 250] } }, u: [{ $set: { piped: { $add: ['$x', 1] } } }, { $unset: 'fam' }], multi: true }],
    });
    expect(updated.json).toMatchObject({ matchedCount: 3, modifiedCount: 3 });
    const piped = await findAll('shop.ranged', { filter: { piped: { $exists: true } }, sort: { x: 1 } });
    expect(piped.map((d) => [(d as { x: number }).x, (d as { piped: number }).piped])).toEqual([
      [10, 11],
      [150, 151],
      [250, 251],
    ]);
    const answer = await api('POST', '/v1/shop/ranged/findAndModify', {
      query: { x: 10 },
      update: [{ $replaceWith: { $mergeObjects: ['$$ROOT', { label: { $concat: ['x=', { $toString: '$x' }] } }] } }],
      new: true,
    });
    expect(answer.json).toMatchObject({ value: { _id: 10, x: 10, piped: 11, label: 'x=10' } });
    const refused = await api('POST', '/v1/shop/ranged/update', { updates: [{ q: { x: 10 }, u: [{ $match: { x: 10 } }] }] });
    expect(refused.json.writeErrors).toMatchObject([{ index: 0, codeName: 'FailedToParse' }]);
  });

  it('updates array elements with $[] and $[<identifier>] and arrayFilters, in update, findAndModify and bulkWrite', async () => {
    await api('POST', '/v1/shop/ranged/update', {
      updates: [{ q: { x: 30 }, u: { $set: { scores: [{ s: 50 }, { s: 95 }, { s: 99 }] } } }],
    });
    const raised = await api('POST', '/v1/shop/ranged/update', {
      updates: [
        {
          q: { x: 30 },
          u: { $set: { 'scores.$[hi].top': true }, $inc: { 'scores.$[].seen': 1 } },
          arrayFilters: [{ 'hi.s': { $gte: 90 } }],
        },
      ],
    });
    expect(raised.json).toMatchObject({ matchedCount: 1, modifiedCount: 1 });
    const fam = await api('POST', '/v1/shop/ranged/findAndModify', {
      query: { x: 30 },
      update: { $mul: { 'scores.$[low].s': 2 } },
      arrayFilters: [{ 'low.s': { $lt: 60 } }],
      new: true,
    });
    expect(fam.json).toMatchObject({
      value: {
        x: 30,
        scores: [
          { s: 100, seen: 1 },
          { s: 95, seen: 1, top: true },
          { s: 99, seen: 1, top: true },
        ],
      },
    });
    const bulk = await api('POST', '/v1/admin/bulkWrite', {
      nsInfo: [{ ns: 'shop.ranged' }],
      ops: [{ update: 0, filter: { x: 30 }, updateMods: { $unset: { 'scores.$[t].top': '' } }, arrayFilters: [{ 't.top': true }] }],
    });
    expect(bulk.json).toMatchObject({ nErrors: 0, nModified: 1 });
    const unused = await api('POST', '/v1/shop/ranged/update', {
      updates: [{ q: { x: 30 }, u: { $set: { 'scores.$[].n': 1 } }, arrayFilters: [{ 'z.s': 1 }] }],
    });
    expect(unused.json.writeErrors).toMatchObject([{ index: 0, codeName: 'FailedToParse' }]);
    expect(((await findAll('shop.ranged', { filter: { x: 30 } }))[0] as { scores: unknown }).scores).toEqual([
      { s: 100, seen: 1 },
      { s: 95, seen: 1 },
      { s: 99, seen: 1 },
    ]);
  });

  it('follows a chunk move it had not seen: the shard answers STALE_CONFIG, the router refreshes and succeeds', async () => {
    // Warm the router's cache, then move [200, MaxKey) from shard2 to shard0 behind its back.
    await findAll('shop.ranged', { filter: { x: { $gte: 250 } } });
    const chunks = await config.getChunks({ ns: 'shop.ranged' });
    const top = chunks.chunks.find((c) => c.shard === 'shard2')!;
    expect(top.range.min).toEqual([200]);
    const source = new pg.Pool({ connectionString: cluster.node('shard2').env.TESSERA_DATABASE_URL, max: 1 });
    const target = new pg.Pool({ connectionString: cluster.node('shard0').env.TESSERA_DATABASE_URL, max: 1 });
    const uuid = (await source.query<{ uuid: string }>("SELECT uuid FROM collections WHERE ns = 'shop.ranged'")).rows[0]!.uuid;
    const table = `c_${uuid.replaceAll('-', '')}`;
    const rows = (await source.query(`SELECT id, shard_key, doc::text AS doc, size FROM ${table}`)).rows;
    for (const row of rows)
      await target.query(`INSERT INTO ${table} (id, shard_key, doc, size, valid_from) VALUES ($1, $2, $3::json, $4, 0)`, [
        row.id,
        row.shard_key,
        row.doc,
        row.size,
      ]);
    await config.commitMigration({
      ns: 'shop.ranged',
      expectedCollectionVersion: chunks.collectionVersion,
      range: top.range,
      donor: 'shard2',
      recipient: 'shard0',
    });
    // A transaction that deletes documents names its ClusterTime first (the history trigger's).
    await source.query(
      `BEGIN; SELECT set_config('tessera.write_time', '0', true), set_config('tessera.keep_history', 'off', true); DELETE FROM ${table}; COMMIT`,
    );
    // What the migration's donor and recipient do after the commit (the migration issue automates it).
    for (const shard of ['shard2', 'shard0']) {
      await new ShardClient(cluster.node(shard).url, { clusterKey: cluster.clusterKey, dispatcher: routerApi.agent }).refreshMetadata(
        'shop.ranged',
      );
    }
    await source.end();
    await target.end();

    const found = await findAll('shop.ranged', { filter: { x: { $gte: 250 } }, sort: { x: 1 } });
    expect(found.map((d) => (d as { x: number }).x)).toEqual(Array.from({ length: 40 }, (_, i) => 250 + i));
    const inserted = await api('POST', '/v1/shop/ranged/insert', { documents: [{ _id: 1000, x: 1000 }] });
    expect(inserted.json).toMatchObject({ insertedCount: 1 });
    expect(await shardCount('shard0', 'shop.ranged')).toBeGreaterThan(100);
  });
});

describe('CRUD on hashed and compound keys', () => {
  it('stores and reads a hashed collection, pre-split over all shards', async () => {
    await config.shardCollection({ ns: 'shop.hashed', key: { user: 'hashed' } });
    const documents = Array.from({ length: 120 }, (_, i) => ({ user: `u${i}`, n: i }));
    expect((await api('POST', '/v1/shop/hashed/insert', { documents, ordered: false })).json).toMatchObject({ insertedCount: 120 });
    const counts = [
      await shardCount('shard0', 'shop.hashed'),
      await shardCount('shard1', 'shop.hashed'),
      await shardCount('shard2', 'shop.hashed'),
    ];
    expect(counts.reduce((a, b) => a + b)).toBe(120);
    expect(counts.every((c) => c > 10)).toBe(true);
    const one = await findAll('shop.hashed', { filter: { user: 'u42' }, projection: { _id: 0 } });
    expect(one).toEqual([{ user: 'u42', n: 42 }]);
    expect(await findAll('shop.hashed', { filter: { n: { $lt: 5 } }, sort: { n: 1 }, projection: { _id: 0, n: 1 } })).toEqual(
      [0, 1, 2, 3, 4].map((n) => ({ n })),
    );
  });

  it('targets a compound key by its prefix', async () => {
    await config.shardCollection({ ns: 'shop.compound', key: { region: 1, id: 1 } });
    const documents = ['eu', 'us', 'ap'].flatMap((region) => Array.from({ length: 10 }, (_, id) => ({ region, id, v: `${region}${id}` })));
    expect((await api('POST', '/v1/shop/compound/insert', { documents })).json).toMatchObject({ insertedCount: 30 });
    const eu = await findAll('shop.compound', { filter: { region: 'eu', id: { $gte: 5 } }, sort: { id: 1 }, projection: { _id: 0, v: 1 } });
    expect(eu).toEqual([5, 6, 7, 8, 9].map((id) => ({ v: `eu${id}` })));
  });
});

describe('an unsharded collection', () => {
  it('is created with its database on the first write and lives on the primary shard', async () => {
    const inserted = await api('POST', '/v1/plain/things/insert', {
      documents: [
        { _id: 'a', v: 1 },
        { _id: 'b', v: 2 },
      ],
    });
    expect(inserted.json).toMatchObject({ insertedCount: 2 });
    const database = await config.getDatabase('plain');
    expect(await shardCount(database.primaryShard, 'plain.things')).toBe(2);
    expect(await findAll('plain.things', { sort: { v: -1 } })).toEqual([
      { _id: 'b', v: 2 },
      { _id: 'a', v: 1 },
    ]);
    expect((await api('POST', '/v1/plain/things/update', { updates: [{ q: { _id: 'a' }, u: { $set: { v: 10 } } }] })).json).toMatchObject({
      modifiedCount: 1,
    });
    expect((await api('POST', '/v1/plain/things/delete', { deletes: [{ q: { _id: 'b' }, limit: 1 }] })).json).toMatchObject({
      deletedCount: 1,
    });
    expect(await findAll('plain.things', {})).toEqual([{ _id: 'a', v: 10 }]);
  });

  it('is listed in the control plane with its database, unsharded', async () => {
    const answer = await controlPlane<{ cluster: { databases: Array<{ name: string; collections: unknown[] }> } }>(
      cluster.configUrl,
      cluster.controlPlaneTokens.viewer,
      '{ cluster { databases { name collections { ns sharded uuid keyPattern collectionVersion } } } }',
    );
    const databases = answer.cluster.databases;
    expect(databases.find((d) => d.name === 'plain')?.collections).toEqual([
      { ns: 'plain.things', sharded: false, uuid: null, keyPattern: null, collectionVersion: null },
    ]);
    const shop = databases.find((d) => d.name === 'shop')?.collections as Array<{ ns: string; sharded: boolean }>;
    expect(shop).toContainEqual(expect.objectContaining({ ns: 'shop.ranged', sharded: true }));
  });

  it('moves the primary with its unsharded collections, data and indexes, and the router follows it', async () => {
    const before = await config.getDatabase('plain');
    const other = ['shard0', 'shard1', 'shard2'].find((s) => s !== before.primaryShard)!;
    expect((await api('POST', '/v1/plain/things/indexes', { indexes: [{ key: { v: 1 }, name: 'v_1' }] })).status).toBe(200);
    const beforeMove = (await api('POST', '/v1/plain/things/insert', { documents: [{ _id: 'before-move', v: 1 }] })).json.operationTime;
    const documents = await findAll('plain.things', {});
    expect(documents.length).toBeGreaterThan(0);

    const moved = await config.movePrimary({ db: 'plain', to: other });
    expect(moved).toMatchObject({ primaryShard: other, version: { lastMod: before.version.lastMod + 1 } });
    expect(await shardCount(other, 'plain.things')).toBe(documents.length);
    expect(await shardCount(before.primaryShard, 'plain.things')).toBe(0);
    // The router still holds the old database version: the old primary tells it so, and it retries at the new one.
    expect(await findAll('plain.things', {})).toEqual(documents);
    const indexes = (await api('GET', '/v1/plain/things/indexes')).json as { cursor: { firstBatch: Array<{ name: string }> } };
    expect(indexes.cursor.firstBatch.map((i) => i.name)).toEqual(['_id_', 'v_1']);
    await api('POST', '/v1/plain/things/insert', { documents: [{ _id: 'after-move', v: 2 }] });
    expect(await shardCount(other, 'plain.things')).toBe(documents.length + 1);
    // The clone brought the documents, not their history: a snapshot from before it is refused, not answered empty.
    const old = await api('POST', '/v1/plain/things/count', { filter: {}, readConcern: { level: 'snapshot', atClusterTime: beforeMove } });
    expect(old.json).toMatchObject({ ok: 0, code: 246, codeName: 'SnapshotUnavailable' });
    const present = await api('POST', '/v1/plain/things/count', { filter: {}, readConcern: { level: 'snapshot' } });
    expect(present.json).toMatchObject({ n: documents.length + 1 });
  });

  it('answers an empty result for a collection that does not exist', async () => {
    expect(await findAll('nowhere.nothing', {})).toEqual([]);
  });

  it('serves the single-document routes', async () => {
    const created = await api('POST', '/v1/plain/docs/documents', { _id: 'k1', name: 'first' });
    expect(created.status).toBeLessThan(300);
    expect((await api('GET', '/v1/plain/docs/documents/k1')).json).toMatchObject({ _id: 'k1', name: 'first' });
    await api('PATCH', '/v1/plain/docs/documents/k1', { name: 'patched' });
    expect((await api('GET', '/v1/plain/docs/documents/k1')).json).toMatchObject({ name: 'patched' });
    expect((await api('DELETE', '/v1/plain/docs/documents/k1')).status).toBeLessThan(300);
    expect((await api('GET', '/v1/plain/docs/documents/k1')).status).toBe(404);
  });
});

describe('bad input', () => {
  it('refuses malformed JSON', async () => {
    const answer = await api('POST', '/v1/shop/ranged/find', '{"filter": ');
    expect(answer.status).toBe(400);
    expect(answer.json.ok).toBe(0);
  });

  it('refuses an unknown operator and an invalid namespace', async () => {
    expect((await api('POST', '/v1/shop/ranged/find', { filter: { x: { $bogus: 1 } } })).json).toMatchObject({
      ok: 0,
      codeName: 'BadValue',
    });
    expect((await api('POST', '/v1/bad$db/c/insert', { documents: [{ a: 1 }] })).json).toMatchObject({
      ok: 0,
      codeName: 'InvalidNamespace',
    });
  });

  it('reports bad documents as write errors of their statements, stopping an ordered batch there', async () => {
    const answer = await api('POST', '/v1/shop/ranged/insert', {
      documents: [
        { _id: 5000, x: 5000 },
        { _id: { $bad: 1 }, x: 1 },
        { _id: 5002, x: 5002 },
      ],
    });
    expect(answer.json).toMatchObject({ insertedCount: 1 });
    expect((answer.json.writeErrors as Array<{ index: number }>).map((e) => e.index)).toEqual([1]);
    expect((await findAll('shop.ranged', { filter: { _id: 5002 } })).length).toBe(0);
  });

  it('stores $-prefixed field names at any level but inside _id, as MongoDB 5.0+', async () => {
    const stored = await api('POST', '/v1/shop/dollars/insert', {
      documents: [{ _id: 7000, x: 7000, $price: 50, location: { $db: 'novels' } }],
    });
    expect(stored.json).toMatchObject({ insertedCount: 1 });
    expect(await findAll('shop.dollars', { filter: { _id: 7000 } })).toEqual([
      { _id: 7000, x: 7000, $price: 50, location: { $db: 'novels' } },
    ]);
    const refused = await api('POST', '/v1/shop/dollars/insert', { documents: [{ _id: { a: { $b: 1 } }, x: 7001 }] });
    expect(refused.json.writeErrors).toMatchObject([{ index: 0, code: 52, codeName: 'DollarPrefixedFieldName' }]);
  });

  it('refuses a shard key holding an array, a duplicate _id, and a shard key change', async () => {
    const arrays = await api('POST', '/v1/shop/ranged/insert', { documents: [{ _id: 6000, x: [1, 2] }], ordered: false });
    expect(JSON.stringify(arrays.json.writeErrors)).toContain('array');
    const duplicate = await api('POST', '/v1/shop/ranged/insert', { documents: [{ _id: 5, x: 5 }] });
    // MongoDB's shape: the index's key pattern and the clashing values at the top of the write error.
    expect(duplicate.json.writeErrors).toMatchObject([
      { index: 0, code: 11000, codeName: 'DuplicateKey', keyPattern: { _id: 1 }, keyValue: { _id: 5 } },
    ]);
    const moved = await api('POST', '/v1/shop/ranged/update', { updates: [{ q: { x: 6 }, u: { $set: { x: 60_000 } } }] });
    expect(JSON.stringify(moved.json.writeErrors ?? moved.json)).toMatch(/shard key/);
    expect(await findAll('shop.ranged', { filter: { x: 6 } })).toHaveLength(1);
  });

  it('refuses a document over 16 MiB', async () => {
    const answer = await api('POST', '/v1/plain/big/insert', { documents: [{ _id: 1, blob: 'x'.repeat(16 * 1024 * 1024 + 10) }] });
    expect(JSON.stringify(answer.json)).toMatch(/BSONObjectTooLarge|too large/);
    expect(await findAll('plain.big', {})).toEqual([]);
  });
});

describe('secondary indexes', () => {
  const documents = Array.from({ length: 90 }, (_, i) => ({ _id: i, user: `u${i}`, email: `e${i}`, tags: [`t${i % 4}`, 'all'], n: i }));

  it('are built on every shard, serve finds exactly, enforce uniqueness, list and drop', async () => {
    await config.shardCollection({ ns: 'shop.indexed', key: { user: 'hashed' } });
    const created = await api('POST', '/v1/shop/indexed/indexes', {
      indexes: [{ key: { tags: 1 } }, { key: { user: 1, email: 1 }, unique: true }],
    });
    expect(created.status, JSON.stringify(created.json)).toBe(200);
    expect(created.json).toMatchObject({ numIndexesBefore: 2, numIndexesAfter: 4, ok: 1 });
    expect((await api('POST', '/v1/shop/indexed/indexes', { indexes: [{ key: { tags: 1 } }] })).json).toMatchObject({
      numIndexesBefore: 4,
      numIndexesAfter: 4,
    });

    expect((await api('POST', '/v1/shop/indexed/insert', { documents, ordered: false })).json).toMatchObject({ insertedCount: 90 });
    for (const query of [
      { filter: { tags: 't1' }, sort: { n: 1 } },
      { filter: { tags: { $in: ['t2', 'none'] }, n: { $lt: 40 } }, sort: { n: -1 } },
      { filter: { user: 'u7', email: 'e7' } },
    ]) {
      const found = await findAll('shop.indexed', query);
      expect(found.length).toBeGreaterThan(0);
      expect(found).toEqual(reference(documents, query));
    }

    const duplicate = await api('POST', '/v1/shop/indexed/insert', { documents: [{ _id: 1000, user: 'u3', email: 'e3' }] });
    expect(duplicate.json).toMatchObject({
      insertedCount: 0,
      writeErrors: [{ index: 0, code: 11000, keyPattern: { user: 1, email: 1 }, keyValue: { user: 'u3', email: 'e3' } }],
    });
    const refused = await api('POST', '/v1/shop/indexed/indexes', { indexes: [{ key: { email: 1 }, unique: true }] });
    expect(refused.status).not.toBe(200);
    expect(refused.json).toMatchObject({ ok: 0, codeName: 'IllegalOperation' });

    const listed = await api('GET', '/v1/shop/indexed/indexes');
    expect(listed.status, JSON.stringify(listed.json)).toBe(200);
    expect((listed.json.cursor as { firstBatch: Array<{ name: string }> }).firstBatch.map((i) => i.name)).toEqual([
      '_id_',
      'user_hashed',
      'tags_1',
      'user_1_email_1',
    ]);
    expect((await api('DELETE', '/v1/shop/indexed/indexes/tags_1')).json).toMatchObject({ nIndexesWas: 4, ok: 1 });
    expect((await api('DELETE', '/v1/shop/indexed/indexes/tags_1')).status).toBe(404);
    expect((await api('DELETE', '/v1/shop/indexed/indexes/_id_')).status).not.toBe(200);
    const after = await api('GET', '/v1/shop/indexed/indexes');
    expect((after.json.cursor as { firstBatch: unknown[] }).firstBatch).toHaveLength(3);
    expect(await findAll('shop.indexed', { filter: { tags: 't1' }, sort: { n: 1 } })).toEqual(
      reference(documents, { filter: { tags: 't1' }, sort: { n: 1 } }),
    );
  });

  it('a collection dropped and sharded again under its name takes writes again through the router', async () => {
    const ns = 'shop.recreated';
    for (const round of [1, 2]) {
      await config.shardCollection({ ns, key: { k: 'hashed' } });
      const documents = Array.from({ length: 30 }, (_, i) => ({ _id: `${round}-${i}`, k: i }));
      const inserted = await api('POST', '/v1/shop/recreated/insert', { documents });
      expect(inserted.json, JSON.stringify(inserted.json)).toMatchObject({ insertedCount: 30, writeErrors: [] });
      expect(await findAll(ns, { filter: {} })).toHaveLength(30);
      expect(await config.dropCollection({ ns })).toEqual({ dropped: true });
    }
  });

  describe('bulkWrite (MongoDB 8.0) across namespaces', () => {
    const bulk = (body: Record<string, unknown>) => api('POST', '/v1/admin/bulkWrite', body);

    it('runs inserts, updates, upserts and deletes on a sharded and an unsharded collection, with per-operation results', async () => {
      const answer = await bulk({
        nsInfo: [{ ns: 'shop.bulk' }, { ns: 'shop.ranged' }],
        ops: [
          { insert: 0, document: { _id: 1, n: 1 } },
          { insert: 0, document: { _id: 2, n: 2 } },
          { insert: 1, document: { _id: 8000, x: 8000 } },
          { update: 1, filter: { x: 20 }, updateMods: { $set: { bulked: true } } },
          { update: 0, filter: { _id: 3 }, updateMods: { $set: { n: 3 } }, upsert: true },
          { update: 0, filter: { n: { $gte: 1 } }, updateMods: [{ $set: { seen: true } }], multi: true },
          { delete: 0, filter: { _id: 1 } },
        ],
      });
      expect(answer.status).toBe(200);
      expect(answer.json).toMatchObject({ ok: 1, nErrors: 0, nInserted: 3, nMatched: 4, nModified: 4, nUpserted: 1, nDeleted: 1 });
      expect((answer.json.cursor as { firstBatch: unknown[] }).firstBatch).toEqual([
        { ok: 1, idx: 0, n: 1 },
        { ok: 1, idx: 1, n: 1 },
        { ok: 1, idx: 2, n: 1 },
        { ok: 1, idx: 3, n: 1, nModified: 1 },
        { ok: 1, idx: 4, n: 1, nModified: 0, upserted: { _id: 3 } },
        { ok: 1, idx: 5, n: 3, nModified: 3 },
        { ok: 1, idx: 6, n: 1 },
      ]);
      expect(await findAll('shop.bulk', { filter: {}, sort: { _id: 1 } })).toEqual([
        { _id: 2, n: 2, seen: true },
        { _id: 3, n: 3, seen: true },
      ]);
      expect(await findAll('shop.ranged', { filter: { x: { $in: [20, 8000] } }, sort: { x: 1 } })).toMatchObject([
        { x: 20, bulked: true },
        { x: 8000 },
      ]);
    });

    it('stops an ordered bulk at its first failure, runs an unordered one to the end, and answers only errors when asked', async () => {
      const ops = [
        { insert: 0, document: { _id: 10 } },
        { insert: 0, document: { _id: 2 } },
        { insert: 0, document: { _id: 11 } },
        { delete: 0, filter: { _id: 10 } },
      ];
      const ordered = await bulk({ nsInfo: [{ ns: 'shop.bulk' }], ops });
      expect(ordered.json).toMatchObject({ nErrors: 1, nInserted: 1, nDeleted: 0 });
      expect((ordered.json.cursor as { firstBatch: unknown[] }).firstBatch).toMatchObject([
        { ok: 1, idx: 0 },
        { ok: 0, idx: 1, code: 11000, codeName: 'DuplicateKey', keyValue: { _id: 2 } },
      ]);
      const unordered = await bulk({
        nsInfo: [{ ns: 'shop.bulk' }],
        ops: ops.map((op, i) => (i === 0 ? { insert: 0, document: { _id: 12 } } : op)),
        ordered: false,
        errorsOnly: true,
      });
      expect(unordered.json).toMatchObject({ nErrors: 1, nInserted: 2, nDeleted: 1 });
      expect((unordered.json.cursor as { firstBatch: unknown[] }).firstBatch).toMatchObject([{ ok: 0, idx: 1, code: 11000 }]);
      expect(
        (await findAll('shop.bulk', { filter: { _id: { $in: [10, 11, 12] } }, sort: { _id: 1 } })).map((d) => (d as { _id: number })._id),
      ).toEqual([11, 12]);
    });

    it('is retryable: sent again with its lsid and txnNumber, it applies nothing twice', async () => {
      const body = {
        nsInfo: [{ ns: 'shop.bulk' }, { ns: 'shop.ranged' }],
        ops: [
          { insert: 0, document: { _id: 20, n: 0 } },
          { update: 0, filter: { _id: 20 }, updateMods: { $inc: { n: 1 } } },
          { update: 1, filter: { x: 21 }, updateMods: { $inc: { bumps: 1 } } },
        ],
        lsid: { id: { $uuid: randomUUID() } },
        txnNumber: 1,
      };
      const first = await bulk(body);
      expect(first.json).toMatchObject({ nErrors: 0, nInserted: 1, nModified: 2 });
      const again = await bulk(body);
      expect(again.json).toMatchObject({ nErrors: 0, retriedStmtIds: [0, 1, 2] });
      expect(await findAll('shop.bulk', { filter: { _id: 20 } })).toEqual([{ _id: 20, n: 1 }]);
      expect(await findAll('shop.ranged', { filter: { x: 21 } })).toMatchObject([{ x: 21, bumps: 1 }]);
    });

    it('refuses an operation naming a namespace nsInfo does not have, and a bad namespace, before running anything', async () => {
      const outOfRange = await bulk({
        nsInfo: [{ ns: 'shop.bulk' }],
        ops: [
          { insert: 0, document: { _id: 30 } },
          { insert: 1, document: { _id: 31 } },
        ],
      });
      expect(outOfRange.status).toBe(400);
      expect(outOfRange.json).toMatchObject({ ok: 0, codeName: 'BadValue' });
      expect(await findAll('shop.bulk', { filter: { _id: 30 } })).toEqual([]);
      expect((await bulk({ nsInfo: [{ ns: 'nodot' }], ops: [{ insert: 0, document: {} }] })).json).toMatchObject({
        codeName: 'InvalidNamespace',
      });
    });
  });
});
