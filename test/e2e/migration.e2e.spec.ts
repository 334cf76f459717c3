import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConfigClient, MoveRangeResult } from '@tessera/protocol';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';
import { FAST_CONFIG_ENV, errorOf, eventually, waitForLeader } from './helpers.js';
import { RouterApi, onShardDatabase, storedCount } from './router-api.js';
import { rootApi, startTestCluster } from './test-cluster.js';

let cluster: LocalCluster;
let dispose: () => Promise<void>;
let config: ConfigClient;
let api: RouterApi;
const SHARDS = ['shard0', 'shard1', 'shard2', 'shard3'];

beforeAll(async () => {
  ({ cluster, dispose } = await startTestCluster({
    shards: 4,
    routers: 1,
    env: {
      ...FAST_CONFIG_ENV,
      TESSERA_ORPHAN_CLEANUP_DELAY_SECS: '0',
      TESSERA_MIGRATION_CLONE_BATCH_DOCUMENTS: '500',
      // Slows one collection's migrations down, so that others can be tried while they run.
      TESSERA_FAILPOINTS:
        'migration.donor.cloning@mig.slow=6000,migration.donor.steady@mig.load=700,migration.recipient.firstCloneBatch@mig.load=100',
    },
  }));
  config = cluster.configClient();
  api = rootApi(cluster);
  await waitForLeader(config);
});

afterAll(async () => {
  await api?.close();
  await dispose?.();
});

async function placement(ns: string): Promise<Array<{ min: unknown; shard: string }>> {
  return (await config.getChunks({ ns })).chunks.map((c) => ({ min: c.range.min[0], shard: c.shard }));
}

async function changelog(what: string, ns: string): Promise<Array<Record<string, unknown>>> {
  return onShardDatabase(cluster, 'config', async (pool) => {
    const rows = await pool.query<{ details: Record<string, unknown> }>(
      'SELECT details FROM changelog WHERE what = $1 AND ns = $2 ORDER BY id',
      [what, ns],
    );
    return rows.rows.map((r) => r.details);
  });
}

describe('moveRange', () => {
  const ns = 'mig.basic';
  const docs = Array.from({ length: 3000 }, (_, i) => ({ _id: i, x: i, y: i % 97, pad: 'p'.repeat(150) }));
  let result: MoveRangeResult;

  beforeAll(async () => {
    await config.shardCollection({ ns, key: { x: 1 } });
    expect((await api.call('POST', '/v1/mig/basic/indexes', { indexes: [{ key: { y: 1 }, name: 'y_1' }] })).status).toBe(200);
    await api.insertMany(ns, docs);
    const primary = (await placement(ns))[0]!.shard;
    const target = SHARDS.find((s) => s !== primary)!;
    result = await config.moveRange({ ns, min: { x: 1000 }, max: { x: 2000 }, toShard: target, waitForDelete: true });
  });

  it('splits off the sub-range and moves it, with every phase reported', async () => {
    const chunks = await placement(ns);
    expect(chunks.map((c) => c.min)).toEqual([{ $minKey: 1 }, 1000, 2000]);
    expect(chunks[1]!.shard).toBe(result.recipient);
    expect(chunks[0]!.shard).toBe(result.donor);
    expect(chunks[2]!.shard).toBe(result.donor);
    expect(result.documentsCloned).toBe(1000);
    expect(result.phases.map((p) => p.phase)).toEqual([
      'registered',
      'cloning',
      'steady',
      'criticalSection',
      'recipientCommitted',
      'committed',
      'released',
      'rangeDeletionScheduled',
    ]);
    const reported = await eventually(async () => {
      const phases = await changelog('moveChunk.phase', ns);
      return phases.length === 8 ? phases : undefined;
    }, 'the phases in the changelog');
    expect(reported.map((p) => p.phase)).toEqual(result.phases.map((p) => p.phase));
    expect(await changelog('moveChunk.commit', ns)).toHaveLength(1);
  });

  it('leaves each document stored once, on its owner, after the range deletion (waitForDelete)', async () => {
    expect(await storedCount(cluster, result.recipient, ns)).toBe(1000);
    expect(await storedCount(cluster, result.donor, ns)).toBe(2000);
    const all = await api.findAll(ns, { filter: {} });
    expect(all).toHaveLength(3000);
    expect(new Set(all.map((d) => (d as { _id: number })._id)).size).toBe(3000);
  });

  it('builds the secondary indexes on the recipient, and they answer', async () => {
    const found = await api.findAll(ns, { filter: { y: 5 } });
    expect(found).toHaveLength(docs.filter((d) => d.y === 5).length);
    const listed = await api.call('GET', '/v1/mig/basic/indexes');
    expect(JSON.stringify(listed.json)).toContain('y_1');
  });

  it('refuses a chunk over twice the max chunk size unless forceJumbo', async () => {
    const small = 'mig.jumbo';
    await config.shardCollection({ ns: small, key: { x: 1 } });
    await config.configureCollectionBalancing({ ns: small, chunkSizeBytes: 65536 });
    // One shard key for all: the chunk cannot be split, so it stays over the limit (a jumbo chunk).
    await api.insertMany(
      small,
      docs.slice(0, 800).map((d) => ({ ...d, x: 5 })),
    );
    const [chunk] = await placement(small);
    const target = SHARDS.find((s) => s !== chunk!.shard)!;
    const refused = await errorOf(config.moveRange({ ns: small, min: { x: { $minKey: 1 } }, toShard: target }));
    expect(refused).toMatchObject({ code: 'CHUNK_TOO_BIG' });
    const forced = await config.moveRange({ ns: small, min: { x: { $minKey: 1 } }, toShard: target, forceJumbo: true });
    expect(forced.documentsCloned).toBe(800);
    expect(await api.findAll(small, { filter: {} })).toHaveLength(800);
  });

  it('rejects bad requests with clear errors', async () => {
    expect(await errorOf(config.moveRange({ ns, min: { x: 1500 }, toShard: 'shard0' }))).toMatchObject({ code: 'BAD_VALUE' });
    expect(await errorOf(config.moveRange({ ns, min: { x: 2000 }, toShard: 'nope' }))).toMatchObject({ code: 'SHARD_NOT_FOUND' });
    expect(await errorOf(config.moveRange({ ns, min: { x: 0 }, max: { x: 2500 }, toShard: 'shard0' }))).toMatchObject({
      code: 'BAD_VALUE',
    });
    expect(await errorOf(config.moveRange({ ns: 'mig.none', min: { x: 0 }, toShard: 'shard0' }))).toMatchObject({
      code: 'NAMESPACE_NOT_FOUND',
    });
  });
});

/** Moves the whole (single-chunk) collection onto `shard` unless it is there. */
async function placeOn(ns: string, shard: string): Promise<void> {
  const [chunk] = await placement(ns);
  if (chunk!.shard !== shard) await config.moveRange({ ns, min: { x: { $minKey: 1 } }, toShard: shard });
}

describe('a migration under a continuous write load', () => {
  const ns = 'mig.load';
  /** What every acknowledged write says the collection holds: _id → counter, or absent. */
  const expected = new Map<number, number>();
  /** Ids whose last write failed, so its outcome is unknown (none expected). */
  const uncertain = new Set<number>();
  let failures = 0;
  let writes = 0;
  let duplicatesSeen = 0;

  it('loses no acknowledged write and resurrects no deleted document', async () => {
    await config.shardCollection({ ns, key: { x: 1 } });
    const initial = Array.from({ length: 2000 }, (_, i) => ({ _id: i, x: i, n: 0 }));
    await api.insertMany(ns, initial);
    for (const d of initial) expected.set(d._id, 0);
    await placeOn(ns, 'shard0');

    let stop = false;
    let nextId = 2000;
    const random = (n: number) => Math.floor(Math.random() * n);
    const write = async (id: number, path: string, body: unknown, apply: (json: Record<string, unknown>) => void) => {
      const answer = await api
        .call('POST', path, body)
        .catch((error: unknown) => ({ status: 0, json: { error: String(error) } as Record<string, unknown> }));
      if (answer.status !== 200 || (answer.json.writeErrors as unknown[] | undefined)?.length) {
        failures++;
        uncertain.add(id);
        return;
      }
      writes++;
      apply(answer.json);
    };
    // Each worker owns the ids ≡ its number (mod 4): no two writes to one document race, so the log is exact.
    const worker = async (self: number) => {
      const mine = (id: number) => id % 4 === self;
      while (!stop) {
        const op = random(10);
        if (op < 4) {
          let id = nextId++;
          while (!mine(id)) id = nextId++;
          await write(id, '/v1/mig/load/insert', { documents: [{ _id: id, x: 1000 + (id % 1000), n: 0 }] }, () => expected.set(id, 0));
        } else if (op < 8) {
          const live = [...expected.keys()].filter(mine);
          const id = live[random(live.length)]!;
          const x = id < 2000 ? id : 1000 + (id % 1000);
          if (x < 1000) continue;
          await write(id, '/v1/mig/load/update', { updates: [{ q: { x, _id: id }, u: { $inc: { n: 1 } } }] }, (json) => {
            if (json.matchedCount === 1) expected.set(id, expected.get(id)! + 1);
          });
        } else {
          const live = [...expected.keys()].filter((id) => id >= 1000 && mine(id));
          const id = live[random(live.length)]!;
          const x = id < 2000 ? id : 1000 + (id % 1000);
          expected.delete(id);
          await write(id, '/v1/mig/load/delete', { deletes: [{ q: { x, _id: id }, limit: 1 }] }, () => undefined);
        }
      }
    };
    const reader = async () => {
      while (!stop) {
        const seen = await api.findAll(ns, { filter: { x: { $gte: 1000 } }, batchSize: 1000 });
        const ids = seen.map((d) => (d as { _id: number })._id);
        duplicatesSeen += ids.length - new Set(ids).size;
      }
    };
    const load = [worker(0), worker(1), worker(2), worker(3), reader()];
    await new Promise((resolve) => setTimeout(resolve, 500));
    const moved = await config.moveRange({ ns, min: { x: 1000 }, max: { x: 2000 }, toShard: 'shard1' });
    await new Promise((resolve) => setTimeout(resolve, 500));
    stop = true;
    await Promise.all(load);

    expect(moved.documentsCloned).toBeGreaterThan(0);
    expect(writes).toBeGreaterThan(20);
    expect(failures).toBe(0);
    expect(duplicatesSeen).toBe(0);
    const stored = new Map((await api.findAll(ns, { filter: {} })).map((d) => [(d as { _id: number })._id, (d as { n: number }).n]));
    for (const id of uncertain) stored.delete(id);
    const wanted = new Map([...expected].filter(([id]) => !uncertain.has(id)));
    expect(stored.size).toBe(wanted.size);
    expect([...stored].filter(([id, n]) => wanted.get(id) !== n)).toEqual([]);
    // The donor's copy of the range is deleted (no orphan left behind), the recipient keeps it.
    await eventually(
      async () =>
        (await storedCount(cluster, 'shard0', ns)) + (await storedCount(cluster, 'shard1', ns)) === stored.size ? true : undefined,
      'the range deletion on the donor',
    );
  });
});

describe('the ownership filter', () => {
  const ns = 'mig.cursor';

  it('lets a query that began before the commit see the moved documents to its end; later queries see each once', async () => {
    await config.shardCollection({ ns, key: { x: 1 } });
    await api.insertMany(
      ns,
      Array.from({ length: 600 }, (_, i) => ({ _id: i, x: i })),
    );
    await placeOn(ns, 'shard2');
    const first = await api.call('POST', '/v1/mig/cursor/find', { filter: {}, batchSize: 50 });
    const cursor = first.json.cursor as { id: string; firstBatch: Array<{ _id: number }> };
    const seen = cursor.firstBatch.map((d) => d._id);

    await config.moveRange({ ns, min: { x: { $minKey: 1 } }, toShard: 'shard3' });
    expect(await api.findAll(ns, { filter: {} })).toHaveLength(600);
    // The old query still holds its view: the donor's copy is not deleted under it.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await storedCount(cluster, 'shard2', ns)).toBe(600);

    let id = cursor.id;
    while (id !== '0' && id !== null) {
      const next = await api.call('POST', `/v1/cursors/${id}/next`, { batchSize: 100 });
      const batch = next.json.cursor as { id: string; nextBatch: Array<{ _id: number }> };
      seen.push(...batch.nextBatch.map((d) => d._id));
      id = batch.id;
    }
    expect(seen).toHaveLength(600);
    expect(new Set(seen).size).toBe(600);
    await eventually(
      async () => ((await storedCount(cluster, 'shard2', ns)) === 0 ? true : undefined),
      'the range deletion after the query ended',
    );
  });
});

describe('migrations at the same time', () => {
  it('lets a donor serve a second migration to another recipient, refuses a shard that takes part in one as recipient, and runs disjoint pairs in parallel', async () => {
    await config.shardCollection({ ns: 'mig.slow', key: { x: 1 } });
    await config.shardCollection({ ns: 'mig.other', key: { x: 1 } });
    await config.shardCollection({ ns: 'mig.parallel', key: { x: 1 } });
    await api.insertMany('mig.slow', [{ _id: 1, x: 1 }]);
    await api.insertMany('mig.other', [{ _id: 1, x: 1 }]);
    await api.insertMany('mig.parallel', [{ _id: 1, x: 1 }]);
    await placeOn('mig.other', 'shard0');
    await placeOn('mig.parallel', 'shard2');
    const slowDonor = (await placement('mig.slow'))[0]!.shard;
    expect(slowDonor).not.toBe('shard1');
    await placeOn('mig.slow', 'shard0');

    // shard0 → shard1 pauses 6 s while cloning, long enough for the others on a loaded machine.
    const slow = config.moveRange({ ns: 'mig.slow', min: { x: { $minKey: 1 } }, toShard: 'shard1' });
    await eventually(
      async () => ((await changelog('moveChunk.start', 'mig.slow')).length > 0 ? true : undefined),
      'the slow migration to start',
    );
    let slowEnded = false;
    void slow.then(() => (slowEnded = true));
    // shard0 serves a second migration, to another recipient: it runs, and ends first.
    await config.moveRange({ ns: 'mig.other', min: { x: { $minKey: 1 } }, toShard: 'shard3' });
    expect(slowEnded).toBe(false);
    // shard1 receives already, shard0 donates: neither receives another.
    for (const toShard of ['shard1', 'shard0']) {
      expect(await errorOf(config.moveRange({ ns: 'mig.parallel', min: { x: { $minKey: 1 } }, toShard })), toShard).toMatchObject({
        code: 'CONFLICTING_OPERATION',
      });
    }
    // shard2 → shard3 shares no shard with the slow one: it runs, and ends first.
    await config.moveRange({ ns: 'mig.parallel', min: { x: { $minKey: 1 } }, toShard: 'shard3' });
    expect(slowEnded).toBe(false);
    await slow;
    expect((await placement('mig.slow'))[0]!.shard).toBe('shard1');
    expect((await placement('mig.other'))[0]!.shard).toBe('shard3');
    expect((await placement('mig.parallel'))[0]!.shard).toBe('shard3');
  });
});
