import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConfigClient } from '@tessera/protocol';
import { FAST_CONFIG_ENV, eventually } from './helpers.js';
import { RouterApi } from './router-api.js';
import { type RoutedTestCluster, startRoutedTestCluster } from './test-cluster.js';

// The balancer against the cluster's topology and settings: a balancing window, zones, and a
// shard drained by removeShard. Three shards, one router, rounds every 500 ms.

let started: RoutedTestCluster;
let config: ConfigClient;
let api: RouterApi;
let catalog: pg.Pool;

beforeAll(async () => {
  started = await startRoutedTestCluster({
    shards: 3,
    env: { ...FAST_CONFIG_ENV, TESSERA_BALANCER_ROUND_INTERVAL_MS: '500', TESSERA_ORPHAN_CLEANUP_DELAY_SECS: '0' },
  });
  ({ config, api, catalog } = started);
  await config.enableSharding({ db: 'topo', primaryShard: 'shard0' });
});

afterAll(async () => started?.stop());

const pad = 'p'.repeat(400);
const inserted = new Map<string, number>();

async function insert(ns: string, keys: number[]): Promise<void> {
  const first = inserted.get(ns) ?? 0;
  await api.insertMany(
    ns,
    keys.map((x, j) => ({ _id: first + j, x, pad })),
    250,
  );
  inserted.set(ns, first + keys.length);
}

/** Every document of `ns` reads back exactly once through the router. */
async function expectEveryDocumentOnce(ns: string): Promise<void> {
  const all = (await api.findAll(ns, { filter: {}, projection: { _id: 1 } })) as Array<{ _id: number }>;
  expect(all).toHaveLength(inserted.get(ns)!);
  expect(new Set(all.map((d) => d._id)).size).toBe(inserted.get(ns));
}

async function shardsOf(ns: string): Promise<Set<string>> {
  return new Set((await config.getChunks({ ns })).chunks.map((c) => c.shard));
}

/** The reasons of the moves the balancer's rounds made for `ns`. */
async function movedReasons(ns: string): Promise<string[]> {
  const rows = await catalog.query<{ details: { migrations: Array<{ ns: string; reason: string; outcome: string }> } }>(
    "SELECT details FROM changelog WHERE what = 'balancer.round' ORDER BY id",
  );
  return rows.rows.flatMap((r) => r.details.migrations).flatMap((m) => (m.ns === ns && m.outcome === 'moved' ? [m.reason] : []));
}

/** HH:MM, `hours` from now, in this machine's time zone (the config server's). */
function clockIn(hours: number): string {
  const at = new Date(Date.now() + hours * 3_600_000);
  return `${String(at.getHours()).padStart(2, '0')}:00`;
}

describe('the balancer and the topology', () => {
  it('starts no migration outside the balancing window, and balances once the window is lifted', async () => {
    const ns = 'topo.window';
    await config.updateSettings({ balancer: { activeWindow: { start: clockIn(2), stop: clockIn(3) } } });
    await config.shardCollection({ ns, key: { x: 1 } });
    await config.configureCollectionBalancing({ ns, chunkSizeBytes: 64 * 1024 });
    await insert(ns, [500_000_000]);
    await new Promise((resolve) => setTimeout(resolve, 500)); // the shard reads the collection's chunk size on the first write
    await insert(
      ns,
      Array.from({ length: 1500 }, () => Math.floor(Math.random() * 1e9)),
    );
    const chunks = await eventually(
      async () => ((await config.getChunks({ ns })).chunks.length >= 6 ? true : undefined),
      'the auto-splitter to cut the collection into chunks',
    );
    expect(chunks).toBe(true);
    expect((await config.balancerCollectionStatus(ns)).firstComplianceViolation).toBe('chunksImbalance');

    // Several rounds' worth of time: the loop wakes but starts no round outside the window.
    const before = (await config.balancerStatus()).lastRound?.startedAt;
    await new Promise((resolve) => setTimeout(resolve, 2500));
    expect((await config.balancerStatus()).lastRound?.startedAt).toBe(before);
    expect([...(await shardsOf(ns))]).toEqual(['shard0']);

    await config.updateSettings({ balancer: { activeWindow: null } });
    await eventually(
      async () => ((await shardsOf(ns)).size === 3 && (await config.balancerCollectionStatus(ns)).balancerCompliant ? true : undefined),
      'the collection spread over the three shards once the window is lifted',
      60_000,
    );
    expect(new Set(await movedReasons(ns))).toEqual(new Set(['imbalance']));
    await expectEveryDocumentOnce(ns);
  }, 90_000);

  it("moves every chunk of a zone range onto the zone's shards", async () => {
    const ns = 'topo.zoned';
    await config.shardCollection({ ns, key: { x: 1 } });
    // Chunks [minKey, 0) and [1000, maxKey) on shard0, [0, 1000) on shard2.
    await config.moveRange({ ns, min: { x: 0 }, max: { x: 1000 }, toShard: 'shard2', forceJumbo: false, waitForDelete: false });
    await insert(
      ns,
      Array.from({ length: 1500 }, (_, i) => i * 2 - 500),
    );
    await config.addShardToZone({ shard: 'shard1', zone: 'low' });
    await config.addShardToZone({ shard: 'shard2', zone: 'high' });
    await config.updateZoneKeyRange({ ns, min: { x: 0 }, max: { x: 1000 }, zone: 'low' });
    await config.updateZoneKeyRange({ ns, min: { x: 1000 }, max: { x: { $maxKey: 1 } }, zone: 'high' });
    try {
      const placement = await eventually(
        async () => {
          if (!(await config.balancerCollectionStatus(ns)).balancerCompliant) return undefined;
          return (await config.getChunks({ ns })).chunks.map(
            (c) => `${JSON.stringify(c.range.min)}..${JSON.stringify(c.range.max)}@${c.shard}`,
          );
        },
        'the zone ranges on their shards',
        60_000,
      );
      expect(placement).toEqual(['[{"$minKey":1}]..[0]@shard0', '[0]..[1000]@shard1', '[1000]..[{"$maxKey":1}]@shard2']);
      expect(new Set(await movedReasons(ns))).toEqual(new Set(['zoneViolation']));
      await expectEveryDocumentOnce(ns);
    } finally {
      // The drain below must be free to move these chunks anywhere.
      await config.updateZoneKeyRange({ ns, min: { x: 0 }, max: { x: 1000 }, zone: null });
      await config.updateZoneKeyRange({ ns, min: { x: 1000 }, max: { x: { $maxKey: 1 } }, zone: null });
      await config.removeShardFromZone({ shard: 'shard1', zone: 'low' });
      await config.removeShardFromZone({ shard: 'shard2', zone: 'high' });
    }
  }, 90_000);

  it('drains a shard being removed onto the others, then lets it leave, losing no document', async () => {
    const started = await config.removeShard({ name: 'shard2' });
    expect(started).toMatchObject({ state: 'started', shard: 'shard2' });
    expect(started.remaining.chunks).toBeGreaterThan(0);

    const done = await eventually(
      async () => {
        const progress = await config.removeShard({ name: 'shard2' });
        return progress.state === 'completed' ? progress : undefined;
      },
      'shard2 drained and removed',
      60_000,
    );
    expect(done.remaining).toEqual({ chunks: 0, jumboChunks: 0, databases: 0, migrations: 0 });
    expect((await config.listShards()).map((s) => s.name)).toEqual(['shard0', 'shard1']);
    for (const ns of ['topo.window', 'topo.zoned']) {
      expect([...(await shardsOf(ns))].sort()).not.toContain('shard2');
      expect(await movedReasons(ns)).toContain('drain');
      await expectEveryDocumentOnce(ns);
    }
  }, 90_000);
});
