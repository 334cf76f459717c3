/**
 * Reads by ClusterTime on real processes (3 shards, 2 routers): a write through one router is
 * seen by a read through the other with its `operationTime` as `afterClusterTime` while chunks
 * move, and a snapshot read at a recorded time answers exactly the state of that time after
 * updates, deletes, inserts, migrations and range deletion changed every shard, and after a
 * shard was killed (-9) between writes and restarted. The kill's moment comes from a seed,
 * printed, and replayed with TESSERA_HISTORY_KILL_SEED.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAST_CONFIG_ENV, eventually } from './helpers.js';
import { RouterApi, storedCount } from './router-api.js';
import { rootApi, type RoutedTestCluster, startRoutedTestCluster } from './test-cluster.js';

const NS = 'chrono.items';
const PATH = '/v1/chrono/items';
type Ts = { t: number; i: number };
interface Item {
  _id: number;
  x: number;
  v: number;
}

let t: RoutedTestCluster;
let routerA: RouterApi;
let routerB: RouterApi;

beforeAll(async () => {
  t = await startRoutedTestCluster({ shards: 3, routers: 2, env: { ...FAST_CONFIG_ENV, TESSERA_ORPHAN_CLEANUP_DELAY_SECS: '0' } });
  routerA = t.api;
  routerB = rootApi(t.cluster, 1);
  await t.config.updateSettings({ balancer: { mode: 'off' }, autoSplit: false });
  await t.config.enableSharding({ db: 'chrono', primaryShard: 'shard0' });
  await t.config.shardCollection({ ns: NS, key: { x: 1 } });
  await t.config.configureCollectionBalancing({ ns: NS, enableAutoMerger: false });
  await t.config.moveRange({ ns: NS, min: { x: 100 }, max: { x: 200 }, toShard: 'shard1' });
  await t.config.moveRange({ ns: NS, min: { x: 200 }, max: { x: 300 }, toShard: 'shard2' });
  for (const router of [routerA, routerB]) {
    await eventually(
      async () => ((await router.call('POST', `${PATH}/count`, { filter: {} })).json.$clusterTime ? true : undefined),
      'the router to sign with the first key',
    );
  }
});

afterAll(async () => {
  await routerB?.close();
  await t?.stop();
});

/** The answer's operationTime and signed $clusterTime, to carry to the next request. */
function timesOf(json: Record<string, unknown>): { operationTime: { $timestamp: Ts }; $clusterTime: unknown } {
  expect(json.operationTime).toBeDefined();
  expect(json.$clusterTime).toBeDefined();
  return { operationTime: json.operationTime as { $timestamp: Ts }, $clusterTime: json.$clusterTime };
}

async function ok(router: RouterApi, path: string, body: Record<string, unknown>): Promise<Record<string, unknown>> {
  const answer = await router.call('POST', path, body);
  expect(answer.status, JSON.stringify(answer.json)).toBe(200);
  return answer.json;
}

/** Every document through `router`, sorted by x, with `readConcern`, draining the cursor. */
async function readAll(router: RouterApi, readConcern: Record<string, unknown> | undefined, clusterTime: unknown): Promise<Item[]> {
  const first = await ok(router, `${PATH}/find`, {
    filter: {},
    sort: { x: 1 },
    batchSize: 50,
    ...(readConcern ? { readConcern } : {}),
    $clusterTime: clusterTime,
  });
  const cursor = first.cursor as { id: string; firstBatch: Item[] };
  const documents = [...cursor.firstBatch];
  let id = cursor.id;
  while (id !== '0') {
    const next = (await ok(router, `/v1/cursors/${id}/next`, { batchSize: 50 })).cursor as { id: string; nextBatch: Item[] };
    documents.push(...next.nextBatch);
    id = next.id;
  }
  return documents;
}

describe('causal consistency across routers', () => {
  it('reads through router B every write acknowledged by router A, while chunks move', async () => {
    let moving = true;
    let moves = 0;
    const mover = (async () => {
      for (let round = 0; moving; round++) {
        await t.config.moveRange({ ns: NS, min: { x: 1_000 }, max: { x: 2_000 }, toShard: round % 2 === 0 ? 'shard1' : 'shard0' });
        moves++;
      }
    })();
    try {
      for (let n = 0; n < 40 || moves < 2; n++) {
        const written = timesOf(await ok(routerA, `${PATH}/insert`, { documents: [{ _id: 10_000 + n, x: 1_000 + (n % 1_000), v: n }] }));
        const read = await ok(routerB, `${PATH}/find`, {
          filter: { _id: 10_000 + n, x: 1_000 + (n % 1_000) },
          readConcern: { afterClusterTime: written.operationTime },
          $clusterTime: written.$clusterTime,
        });
        expect((read.cursor as { firstBatch: Item[] }).firstBatch, `write ${n}`).toEqual([
          { _id: 10_000 + n, x: 1_000 + (n % 1_000), v: n },
        ]);
        const counted = await ok(routerB, `${PATH}/count`, {
          filter: { _id: 10_000 + n },
          readConcern: { level: 'majority', afterClusterTime: written.operationTime },
          $clusterTime: written.$clusterTime,
        });
        expect(counted.n).toBe(1);
      }
    } finally {
      moving = false;
      await mover;
    }
    expect(moves).toBeGreaterThanOrEqual(2);
  });

  it('refuses an afterClusterTime no node has reached (InvalidOptions) and atClusterTime without snapshot', async () => {
    const future = { $timestamp: { t: Math.floor(Date.now() / 1000) + 30, i: 1 } };
    const refused = await routerB.call('POST', `${PATH}/find`, { filter: {}, readConcern: { afterClusterTime: future } });
    expect([refused.status, refused.json.codeName]).toEqual([400, 'InvalidOptions']);
    const notSnapshot = await routerB.call('POST', `${PATH}/count`, { filter: {}, readConcern: { atClusterTime: future } });
    expect([notSnapshot.status, notSnapshot.json.codeName]).toEqual([400, 'InvalidOptions']);
  });
});

describe('snapshot reads', () => {
  const filter = { x: { $lt: 300 } };
  const inRange = (items: Item[]) => items.filter((d) => d.x < 300);

  it('answers at a recorded time exactly the state of that time, on every shard, after writes, moves and range deletion', async () => {
    const initial: Item[] = Array.from({ length: 300 }, (_, x) => ({ _id: x, x, v: 0 }));
    let last: Record<string, unknown> = {};
    for (let from = 0; from < 300; from += 100) last = await ok(routerA, `${PATH}/insert`, { documents: initial.slice(from, from + 100) });
    const atInsert = timesOf(last);
    expect(inRange(await readAll(routerB, undefined, atInsert.$clusterTime))).toEqual(initial);

    await ok(routerA, `${PATH}/update`, { updates: [{ q: { x: { $lt: 300 }, v: 0 }, u: { $inc: { v: 1 } }, multi: true }] });
    expect(
      await ok(routerA, `${PATH}/delete`, {
        deletes: [{ q: { x: { $in: initial.filter((d) => d.x % 5 === 0).map((d) => d.x) } }, limit: 0 }],
      }),
    ).toMatchObject({ deletedCount: 60 });
    const afterWrites = timesOf(await ok(routerA, `${PATH}/update`, { updates: [{ q: { x: 7 }, u: { $set: { v: 70 } } }] }));
    const middle = initial.filter((d) => d.x % 5 !== 0).map((d) => ({ ...d, v: d.x === 7 ? 70 : 1 }));

    // Every range moves, and the donors delete what they gave away.
    await t.config.moveRange({ ns: NS, min: { x: 0 }, max: { x: 100 }, toShard: 'shard2' });
    await t.config.moveRange({ ns: NS, min: { x: 100 }, max: { x: 200 }, toShard: 'shard0' });
    await t.config.moveRange({ ns: NS, min: { x: 200 }, max: { x: 300 }, toShard: 'shard1' });
    const routed = (await ok(routerA, `${PATH}/count`, { filter: {} })).n as number;
    const stored = async () => {
      let n = 0;
      for (const shard of ['shard0', 'shard1', 'shard2']) n += await storedCount(t.cluster, shard, NS);
      return n;
    };
    await eventually(async () => ((await stored()) === routed ? true : undefined), 'the range deleter to delete every orphan');
    const now = timesOf(await ok(routerA, `${PATH}/update`, { updates: [{ q: { x: 8 }, u: { $set: { v: 80 } } }] }));
    const latest = middle.map((d) => (d.x === 8 ? { ...d, v: 80 } : d));

    for (const router of [routerA, routerB]) {
      const atFirst = await readAll(router, { level: 'snapshot', atClusterTime: atInsert.operationTime }, now.$clusterTime);
      expect(inRange(atFirst)).toEqual(initial);
      const atSecond = await readAll(router, { level: 'snapshot', atClusterTime: afterWrites.operationTime }, now.$clusterTime);
      expect(inRange(atSecond)).toEqual(middle);
      expect(inRange(await readAll(router, undefined, now.$clusterTime))).toEqual(latest);
      const counted = await ok(router, `${PATH}/count`, {
        filter,
        readConcern: { level: 'snapshot', atClusterTime: atInsert.operationTime },
        $clusterTime: now.$clusterTime,
      });
      expect(counted.n).toBe(300);
      const distinct = await ok(router, `${PATH}/distinct`, {
        key: 'v',
        filter,
        readConcern: { level: 'snapshot', atClusterTime: afterWrites.operationTime },
        $clusterTime: now.$clusterTime,
      });
      expect(distinct.values).toEqual([1, 70]);
    }
  });

  it('reads at the present without atClusterTime and says at which time', async () => {
    const written = timesOf(await ok(routerA, `${PATH}/update`, { updates: [{ q: { x: 8 }, u: { $set: { v: 81 } } }] }));
    const answer = await ok(routerB, `${PATH}/find`, {
      filter: { x: 8 },
      readConcern: { level: 'snapshot' },
      $clusterTime: written.$clusterTime,
    });
    const cursor = answer.cursor as { firstBatch: Item[]; atClusterTime: { $timestamp: Ts } };
    expect(cursor.firstBatch).toEqual([{ _id: 8, x: 8, v: 81 }]);
    const at = cursor.atClusterTime.$timestamp;
    const { t: wt, i: wi } = written.operationTime.$timestamp;
    expect(at.t > wt || (at.t === wt && at.i >= wi)).toBe(true);
  });

  it('refuses a time older than the history window with SnapshotTooOld', async () => {
    await ok(routerA, '/v1/chrono/plain/insert', { documents: [{ _id: 1 }] });
    const old = { $timestamp: { t: Math.floor(Date.now() / 1000) - 400, i: 1 } };
    const refused = await routerB.call('POST', '/v1/chrono/plain/find', {
      filter: {},
      readConcern: { level: 'snapshot', atClusterTime: old },
    });
    expect([refused.status, refused.json.codeName]).toEqual([409, 'SnapshotTooOld']);
  });
});

describe('snapshot reads across a kill -9 of a shard', () => {
  const seed = /^\d+$/.test(process.env.TESSERA_HISTORY_KILL_SEED ?? '')
    ? Number(process.env.TESSERA_HISTORY_KILL_SEED)
    : Math.floor(Math.random() * 1_000);
  const KEYS = 8;
  const OPS = 60;

  it(`answers each acknowledged write's time with exactly the writes up to it (seed ${seed})`, async () => {
    console.log(`snapshot kill test: seed ${seed} (TESSERA_HISTORY_KILL_SEED=${seed} replays it)`);
    const killAt = 10 + (seed % (OPS - 20));
    const lsid = { id: { $uuid: randomUUID() } };
    // Keys 5,000.. live on shard0, the shard killed.
    const acked: Array<{ key: number; value: number; time: { $timestamp: Ts }; clusterTime: unknown }> = [];
    await ok(routerA, `${PATH}/insert`, { documents: Array.from({ length: KEYS }, (_, k) => ({ _id: 5_000 + k, x: 5_000 + k, v: -1 })) });
    for (let n = 0; n < OPS; n++) {
      const key = 5_000 + ((n * 5) % KEYS);
      const body = { updates: [{ q: { x: key }, u: { $set: { v: n } } }], lsid, txnNumber: n };
      if (n === killAt) {
        // The shard dies with this write in flight (or just before or after it).
        const inFlight = routerA.call('POST', `${PATH}/update`, body).catch(() => undefined);
        await new Promise((resolve) => setTimeout(resolve, seed % 5));
        await t.cluster.kill('shard0');
        await inFlight;
        await t.cluster.restart('shard0');
      }
      // A retryable write: retried until acknowledged, it applies once whether or not the kill caught it.
      const answer = await eventually(async () => {
        const attempt = await routerA.call('POST', `${PATH}/update`, body);
        return attempt.status === 200 && (attempt.json.writeErrors as unknown[]).length === 0 ? attempt.json : undefined;
      }, `write ${n} to be acknowledged`);
      const times = timesOf(answer);
      acked.push({ key, value: n, time: times.operationTime, clusterTime: times.$clusterTime });
    }
    const last = acked[acked.length - 1]!.clusterTime;
    for (const [k, { time }] of acked.entries()) {
      const expected = new Map(Array.from({ length: KEYS }, (_, j) => [5_000 + j, -1]));
      for (const op of acked.slice(0, k + 1)) expected.set(op.key, op.value);
      const answer = await ok(routerB, `${PATH}/find`, {
        filter: { x: { $gte: 5_000, $lt: 5_000 + KEYS } },
        sort: { x: 1 },
        readConcern: { level: 'snapshot', atClusterTime: time },
        $clusterTime: last,
      });
      const found = (answer.cursor as { firstBatch: Item[] }).firstBatch.map((d) => [d.x, d.v]);
      expect(found, `at write ${k} (seed ${seed}, kill at ${killAt})`).toEqual([...expected.entries()]);
    }
  });
});
