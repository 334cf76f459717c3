import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConfigClient } from '@tessera/protocol';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';
import { FAST_CONFIG_ENV, eventually, waitForLeader } from './helpers.js';
import { type ApiResponse, RouterApi } from './router-api.js';
import { rootApi, startTestCluster } from './test-cluster.js';

/**
 * hint, comment and maxTimeMS on real processes. Failpoints hold a write on `opts.slow` in the
 * router and a read of `opts.slowread` in its shard for 2 s, so an operation is known to be in
 * progress (currentOp) or over its time limit (maxTimeMS).
 */

const PAUSE_MS = 2_000;
let cluster: LocalCluster;
let dispose: () => Promise<void>;
let config: ConfigClient;
let api: RouterApi;

beforeAll(async () => {
  ({ cluster, dispose } = await startTestCluster({
    shards: 2,
    routers: 1,
    env: {
      ...FAST_CONFIG_ENV,
      TESSERA_FAILPOINTS: `router.write.beforeReply@opts.slow=${PAUSE_MS},shard.read.beforeScan@opts.slowread=${PAUSE_MS}`,
    },
  }));
  config = cluster.configClient();
  api = rootApi(cluster);
  await waitForLeader(config);
  await config.shardCollection({ ns: 'opts.items', key: { x: 1 } });
  const documents = Array.from({ length: 50 }, (_, x) => ({ _id: x, x, tag: `t${x % 5}` }));
  for (const coll of ['items', 'slow', 'slowread']) {
    expect((await api.call('POST', `/v1/opts/${coll}/insert`, { documents })).status).toBe(200);
  }
  expect((await api.call('POST', '/v1/opts/items/indexes', { indexes: [{ key: { tag: 1 }, name: 'tag_1' }] })).status).toBe(200);
});

afterAll(async () => {
  await dispose?.();
  await api?.close();
});

const BAD_HINT = {
  code: 2,
  codeName: 'BadValue',
  errmsg: expect.stringContaining('hint provided does not correspond to an existing index'),
};

describe('hint', () => {
  it('takes an index by name or key pattern, or $natural, on every read', async () => {
    for (const hint of ['tag_1', { tag: 1 }, '_id_', { x: 1 }, { $natural: 1 }]) {
      const found = await api.call('POST', '/v1/opts/items/find', { filter: { tag: 't1' }, hint });
      expect(found.status, JSON.stringify(hint)).toBe(200);
      expect((found.json.cursor as { firstBatch: unknown[] }).firstBatch).toHaveLength(10);
    }
    expect((await api.call('POST', '/v1/opts/items/count', { filter: { tag: 't1' }, hint: 'tag_1' })).json).toMatchObject({ n: 10 });
  });

  it('refuses a hint naming no index with BadValue, on reads and per statement on writes', async () => {
    for (const [path, body] of [
      ['find', { hint: 'nope' }],
      ['find', { hint: { tag: -1 } }],
      ['count', { hint: 'nope' }],
      ['distinct', { key: 'tag', hint: 'nope' }],
      ['aggregate', { pipeline: [], hint: { nope: 1 } }],
      ['findAndModify', { query: { x: 1 }, update: { $set: { y: 1 } }, hint: 'nope' }],
    ] as Array<[string, Record<string, unknown>]>) {
      const answer = await api.call('POST', `/v1/opts/items/${path}`, body);
      expect(answer.status, path).toBe(400);
      expect(answer.json, path).toMatchObject(BAD_HINT);
    }
    const updated = await api.call('POST', '/v1/opts/items/update', {
      updates: [
        { q: { x: 1 }, u: { $set: { y: 1 } }, hint: 'nope' },
        { q: { x: 2 }, u: { $set: { y: 1 } }, hint: 'tag_1' },
        { q: { tag: 't3' }, u: { $set: { y: 1 } }, hint: 'nope' },
      ],
      ordered: false,
    });
    expect(updated.json).toMatchObject({
      matchedCount: 1,
      writeErrors: [
        { index: 0, ...BAD_HINT },
        { index: 2, ...BAD_HINT },
      ],
    });
    const deleted = await api.call('POST', '/v1/opts/items/delete', { deletes: [{ q: { x: 3 }, limit: 1, hint: 'nope' }] });
    expect(deleted.json).toMatchObject({ deletedCount: 0, writeErrors: [{ index: 0, ...BAD_HINT }] });
  });
});

describe('$expr and let', () => {
  it('match fields against each other and against let, in find, count, aggregate and writes', async () => {
    const found = await api.findAll('opts.items', { filter: { $expr: { $gt: ['$x', '$$min'] } }, let: { min: 45 }, sort: { x: 1 } });
    expect((found as Array<{ x: number }>).map((d) => d.x)).toEqual([46, 47, 48, 49]);
    expect((await api.call('POST', '/v1/opts/items/count', { filter: { $expr: { $lt: ['$x', 3] } } })).json).toMatchObject({ n: 3 });
    const aggregated = await api.call('POST', '/v1/opts/items/aggregate', {
      pipeline: [{ $match: { $expr: { $lte: ['$x', '$$max'] } } }, { $count: 'n' }],
      let: { max: 9 },
    });
    expect(aggregated.json).toMatchObject({ cursor: { firstBatch: [{ n: 10 }] } });
    const tens = { $expr: { $eq: [{ $mod: ['$x', 10] }, 0] } };
    expect(
      (await api.call('POST', '/v1/opts/items/update', { updates: [{ q: tens, u: { $set: { tens: 1 } }, multi: true }] })).json,
    ).toMatchObject({
      matchedCount: 5,
    });
    expect((await api.call('POST', '/v1/opts/items/find', { filter: { $expr: { $bogus: 1 } } })).json).toMatchObject({ code: 2 });
  });
});

describe('comment and currentOp', () => {
  it('lists an operation in progress with its comment, and forgets it once answered', async () => {
    const comment = { trace: 'checkout-42' };
    const update = api.call('POST', '/v1/opts/slow/update', { updates: [{ q: { x: 1 }, u: { $set: { seen: 1 } } }], comment });
    const entry = await eventually(async () => {
      const { inprog } = (await api.call('GET', '/v1/admin/currentOp')).json as { inprog: Array<Record<string, unknown>> };
      return inprog.find((op) => op['ns'] === 'opts.slow');
    }, 'the update in currentOp');
    expect(entry).toMatchObject({ op: 'update', active: true, command: { update: 'slow', $db: 'opts', comment } });
    expect((await update).json).toMatchObject({ matchedCount: 1 });
    const { inprog } = (await api.call('GET', '/v1/admin/currentOp')).json as { inprog: Array<Record<string, unknown>> };
    expect(inprog.filter((op) => op['ns'] === 'opts.slow')).toEqual([]);
  });
});

describe('maxTimeMS', () => {
  const expired = (answer: ApiResponse) => {
    expect(answer.status, JSON.stringify(answer.json)).toBe(504);
    expect(answer.json).toMatchObject({ code: 50, codeName: 'MaxTimeMSExpired' });
  };

  it('stops a read that runs past it with MaxTimeMSExpired, and lets it run without one', async () => {
    expired(await api.call('POST', '/v1/opts/slowread/find', { filter: {}, maxTimeMS: 200 }));
    expired(await api.call('POST', '/v1/opts/slowread/aggregate', { pipeline: [{ $count: 'n' }], maxTimeMS: 200 }));
    const whole = await api.call('POST', '/v1/opts/slowread/find', { filter: {}, batchSize: 100 });
    expect((whole.json.cursor as { firstBatch: unknown[] }).firstBatch).toHaveLength(50);
    const inTime = await api.call('POST', '/v1/opts/items/find', { filter: {}, batchSize: 100, maxTimeMS: 60_000 });
    expect((inTime.json.cursor as { firstBatch: unknown[] }).firstBatch).toHaveLength(50);
  });
});
