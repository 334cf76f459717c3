import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConfigClient } from '@tessera/protocol';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';
import { FAST_CONFIG_ENV, spreadChunks, waitForLeader } from './helpers.js';
import { type ApiResponse, RouterApi } from './router-api.js';
import { rootApi, startTestCluster } from './test-cluster.js';

/**
 * Single-document writes without the shard key (MongoDB 7.0's write without shard key) on real
 * processes: a collection ranged on `x` with one chunk on each of three shards, written through
 * the router by filters that name no shard key.
 */

let cluster: LocalCluster;
let dispose: () => Promise<void>;
let config: ConfigClient;
let api: RouterApi;

const items = Array.from({ length: 300 }, (_, i) => ({ _id: i, x: i, tag: `t${i % 3}`, n: 0 }));

beforeAll(async () => {
  ({ cluster, dispose } = await startTestCluster({ shards: 3, routers: 1, env: FAST_CONFIG_ENV }));
  config = cluster.configClient();
  api = rootApi(cluster);
  await waitForLeader(config);
  await config.shardCollection({ ns: 'wsk.items', key: { x: 1 } });
  await spreadChunks(config, 'wsk.items', [100, 200]);
  expect((await api.call('POST', '/v1/wsk/items/insert', { documents: items })).json).toMatchObject({ insertedCount: 300 });
});

afterAll(async () => {
  await dispose?.();
  await api?.close();
});

async function ok(answer: Promise<ApiResponse>): Promise<Record<string, unknown>> {
  const { status, json } = await answer;
  if (status !== 200) throw new Error(`answered ${status}: ${JSON.stringify(json)}`);
  return json;
}

const count = async (coll: string, filter: Record<string, unknown>) => (await api.findAll(`wsk.${coll}`, { filter })).length;

describe('single-document writes without the shard key', () => {
  it('updateOne, replaceOne, deleteOne and findAndModify change exactly one document, the sorted first for findAndModify', async () => {
    const updated = await ok(api.call('POST', '/v1/wsk/items/update', { updates: [{ q: { tag: 't1' }, u: { $inc: { n: 1 } } }] }));
    expect(updated).toMatchObject({ matchedCount: 1, modifiedCount: 1 });
    expect(await count('items', { n: 1 })).toBe(1);

    const replaced = await ok(api.call('POST', '/v1/wsk/items/update', { updates: [{ q: { _id: 151 }, u: { x: 151, tag: 'replaced' } }] }));
    expect(replaced).toMatchObject({ matchedCount: 1, modifiedCount: 1 });
    expect(await api.findAll('wsk.items', { filter: { _id: 151 } })).toEqual([{ _id: 151, x: 151, tag: 'replaced' }]);

    expect(await ok(api.call('POST', '/v1/wsk/items/delete', { deletes: [{ q: { tag: 't0' }, limit: 1 }] }))).toMatchObject({
      deletedCount: 1,
    });
    expect(await count('items', { tag: 't0' })).toBe(99);

    const last = await ok(
      api.call('POST', '/v1/wsk/items/findAndModify', {
        query: { tag: 't1' },
        sort: { x: -1 },
        update: { $set: { last: true } },
        new: true,
      }),
    );
    expect(last).toMatchObject({ value: { _id: 298, last: true }, lastErrorObject: { n: 1, updatedExisting: true } });
    const first = await ok(api.call('POST', '/v1/wsk/items/findAndModify', { query: { tag: 't2' }, sort: { x: 1 }, remove: true }));
    expect(first).toMatchObject({ value: { _id: 2 }, lastErrorObject: { n: 1 } });
  });

  it('matches nothing when no document matches, and refuses an upsert without the full shard key', async () => {
    expect(await ok(api.call('POST', '/v1/wsk/items/update', { updates: [{ q: { tag: 'none' }, u: { $set: { n: 5 } } }] }))).toMatchObject({
      matchedCount: 0,
      modifiedCount: 0,
    });
    expect(await ok(api.call('POST', '/v1/wsk/items/findAndModify', { query: { tag: 'none' }, remove: true }))).toMatchObject({
      value: null,
      lastErrorObject: { n: 0 },
    });
    const upsert = await api.call('POST', '/v1/wsk/items/update', {
      updates: [{ q: { tag: 'none' }, u: { $set: { n: 5 } }, upsert: true }],
    });
    expect(upsert.json).toMatchObject({ writeErrors: [{ index: 0, code: 61, codeName: 'ShardKeyNotFound' }] });
  });

  it('runs a batch mixing writes with and without the shard key in order, stopping an ordered one at its first error', async () => {
    const batch = await ok(
      api.call('POST', '/v1/wsk/items/update', {
        updates: [
          { q: { _id: 10 }, u: { $set: { b: 1 } } },
          { q: { x: 11 }, u: { $set: { b: 1 } } },
          { q: { _id: 13 }, u: { $inc: { tag: 1 } } },
          { q: { _id: 16 }, u: { $set: { b: 1 } } },
        ],
      }),
    );
    expect(batch).toMatchObject({ matchedCount: 2, modifiedCount: 2, writeErrors: [{ index: 2, codeName: 'TypeMismatch' }] });
    expect((await api.findAll('wsk.items', { filter: { b: 1 }, sort: { _id: 1 } })).map((d) => (d as { _id: number })._id)).toEqual([
      10, 11,
    ]);
  });

  it('answers a retried retryable write from the history of the shard that ran it, never changing a second document', async () => {
    const lsid = { id: { $uuid: randomUUID() } };
    const sum = async () =>
      (await api.findAll('wsk.items', { filter: { tag: 't0' } })).reduce((s: number, d) => s + (d as { n: number }).n, 0);
    const before = await sum();
    const update = { lsid, txnNumber: 1, updates: [{ q: { tag: 't0' }, u: { $inc: { n: 10 } } }] };
    expect(await ok(api.call('POST', '/v1/wsk/items/update', update))).toMatchObject({ matchedCount: 1, modifiedCount: 1 });
    expect(await ok(api.call('POST', '/v1/wsk/items/update', update))).toMatchObject({
      matchedCount: 1,
      modifiedCount: 1,
      retriedStmtIds: [0],
    });
    expect(await sum()).toBe(before + 10);

    const remaining = await count('items', { tag: 't0' });
    const remove = { lsid, txnNumber: 2, deletes: [{ q: { tag: 't0', n: 0 }, limit: 1 }] };
    expect(await ok(api.call('POST', '/v1/wsk/items/delete', remove))).toMatchObject({ deletedCount: 1 });
    expect(await ok(api.call('POST', '/v1/wsk/items/delete', remove))).toMatchObject({ deletedCount: 1, retriedStmtIds: [0] });
    expect(await count('items', { tag: 't0' })).toBe(remaining - 1);

    const pop = { lsid, txnNumber: 3, query: { tag: 't1' }, sort: { x: 1 }, remove: true };
    const popped = await ok(api.call('POST', '/v1/wsk/items/findAndModify', pop));
    expect(await ok(api.call('POST', '/v1/wsk/items/findAndModify', pop))).toMatchObject({ value: popped.value, retriedStmtIds: [0] });

    // A retry finding the first attempt's document changed picks one on another shard: the
    // probe finds the shard that ran the statement, which answers from its history.
    const spread = {
      lsid,
      txnNumber: 5,
      updates: [{ q: { _id: { $in: [60, 260] }, moved: { $exists: false } }, u: { $set: { moved: 1 } } }],
    };
    expect(await ok(api.call('POST', '/v1/wsk/items/update', spread))).toMatchObject({ matchedCount: 1 });
    expect(await ok(api.call('POST', '/v1/wsk/items/update', spread))).toMatchObject({ matchedCount: 1, retriedStmtIds: [0] });
    expect(await count('items', { moved: 1 })).toBe(1);
    const far = { lsid, txnNumber: 6, deletes: [{ q: { _id: { $in: [70, 270] } }, limit: 1 }] };
    expect(await ok(api.call('POST', '/v1/wsk/items/delete', far))).toMatchObject({ deletedCount: 1 });
    expect(await ok(api.call('POST', '/v1/wsk/items/delete', far))).toMatchObject({ deletedCount: 1, retriedStmtIds: [0] });
    expect(await count('items', { _id: { $in: [70, 270] } })).toBe(1);
    const popFar = { lsid, txnNumber: 7, query: { x: { $in: [50, 250] } }, sort: { x: 1 }, remove: true };
    expect(await ok(api.call('POST', '/v1/wsk/items/findAndModify', popFar))).toMatchObject({ value: { _id: 50 } });
    expect(await ok(api.call('POST', '/v1/wsk/items/findAndModify', popFar))).toMatchObject({ value: { _id: 50 }, retriedStmtIds: [0] });
    expect(await count('items', { _id: 250 })).toBe(1);

    const mixed = {
      lsid,
      txnNumber: 8,
      updates: [
        { q: { tag: 't2' }, u: { $inc: { n: 1 } } },
        { q: { x: 200 }, u: { $inc: { n: 1 } } },
      ],
    };
    expect(await ok(api.call('POST', '/v1/wsk/items/update', mixed))).toMatchObject({ matchedCount: 2 });
    expect(await ok(api.call('POST', '/v1/wsk/items/update', mixed))).toMatchObject({ matchedCount: 2, retriedStmtIds: [0, 1] });
  });

  it('writes inside a transaction at its snapshot, undone by an abort', async () => {
    const lsid = { id: { $uuid: randomUUID() } };
    const before = await count('items', { tag: 't1' });
    const start = { lsid, txnNumber: 1, autocommit: false, startTransaction: true };
    expect(await ok(api.call('POST', '/v1/wsk/items/delete', { ...start, deletes: [{ q: { tag: 't1' }, limit: 1 }] }))).toMatchObject({
      deletedCount: 1,
    });
    expect(
      await ok(
        api.call('POST', '/v1/wsk/items/update', {
          lsid,
          txnNumber: 1,
          autocommit: false,
          updates: [{ q: { tag: 't1' }, u: { $set: { inTxn: 1 } } }],
        }),
      ),
    ).toMatchObject({ matchedCount: 1 });
    await ok(api.call('POST', '/v1/admin/abortTransaction', { lsid, txnNumber: 1, autocommit: false }));
    expect(await count('items', { tag: 't1' })).toBe(before);
    expect(await count('items', { inTxn: 1 })).toBe(0);

    await ok(
      api.call('POST', '/v1/wsk/items/update', {
        lsid,
        txnNumber: 2,
        autocommit: false,
        startTransaction: true,
        updates: [{ q: { tag: 't1' }, u: { $set: { inTxn: 2 } } }],
      }),
    );
    await ok(api.call('POST', '/v1/admin/commitTransaction', { lsid, txnNumber: 2, autocommit: false }));
    expect(await count('items', { inTxn: 2 })).toBe(1);
  });

  it('changes each document once while its chunk moves and writers race for it, every retry answered from history (checked against a log)', async () => {
    const ns = 'wsk.moving';
    await config.shardCollection({ ns, key: { x: 1 } });
    await spreadChunks(config, ns, [1000, 2000]);
    const documents = Array.from({ length: 3000 }, (_, x) => ({ _id: x, x, kind: x % 2 === 0 ? 'hit' : 'gone', hits: 0 }));
    expect((await api.call('POST', '/v1/wsk/moving/insert', { documents })).json).toMatchObject({ insertedCount: 3000 });
    const log = { updates: 0, deletes: 0, retried: 0 };
    let done = false;
    const mover = (async () => {
      try {
        for (const to of ['shard0', 'shard2', 'shard1', 'shard0']) await config.moveChunk({ ns, find: { x: 1500 }, to });
      } finally {
        done = true;
      }
    })();
    // Three writers whose filters name no shard key pick the same first documents: a writer
    // whose document another changed first (hits no longer 0, or deleted) must pick another.
    const writer = async () => {
      const lsid = { id: { $uuid: randomUUID() } };
      for (let txnNumber = 1; !done || txnNumber <= 30; txnNumber++) {
        const op =
          txnNumber % 2 === 0
            ? {
                path: 'update',
                body: { lsid, txnNumber, updates: [{ q: { kind: 'hit', hits: 0, x: { $gte: 900 } }, u: { $inc: { hits: 1 } } }] },
              }
            : { path: 'delete', body: { lsid, txnNumber, deletes: [{ q: { kind: 'gone', x: { $gte: 900 } }, limit: 1 }] } };
        const first = await ok(api.call('POST', `/v1/wsk/moving/${op.path}`, op.body));
        const changed = op.path === 'update' ? (first.modifiedCount as number) : (first.deletedCount as number);
        expect(changed, JSON.stringify(first)).toBe(1);
        // Every third operation is sent again, as by a client whose answer was lost.
        if (txnNumber % 3 === 0) {
          const again = await ok(api.call('POST', `/v1/wsk/moving/${op.path}`, op.body));
          expect(again, JSON.stringify(again)).toMatchObject({
            retriedStmtIds: [0],
            ...(op.path === 'update' ? { modifiedCount: 1 } : { deletedCount: 1 }),
          });
          log.retried++;
        }
        if (op.path === 'update') log.updates++;
        else log.deletes++;
      }
    };
    await Promise.all([writer(), writer(), writer(), mover]);
    const after = (await api.findAll(ns, {})) as Array<{ kind: string; hits: number }>;
    expect(after.filter((d) => d.kind === 'gone')).toHaveLength(1500 - log.deletes);
    const hits = after.filter((d) => d.kind === 'hit').map((d) => d.hits);
    expect(hits.filter((h) => h > 1)).toEqual([]);
    expect(hits.reduce((s, h) => s + h, 0)).toBe(log.updates);
    expect(after).toHaveLength(3000 - log.deletes);
    expect(log.retried).toBeGreaterThan(10);
  });
});
