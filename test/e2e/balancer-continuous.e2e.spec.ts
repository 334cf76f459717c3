import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConfigClient } from '@tessera/protocol';
import { type DonorSummary, FAST_CONFIG_ENV, eventually, overlappingMigrations, overlappingRounds } from './helpers.js';
import { RouterApi } from './router-api.js';
import { type RoutedTestCluster, startRoutedTestCluster } from './test-cluster.js';

let started: RoutedTestCluster;
let config: ConfigClient;
let api: RouterApi;
let catalog: pg.Pool;

beforeAll(async () => {
  started = await startRoutedTestCluster({
    shards: 4,
    env: { ...FAST_CONFIG_ENV, TESSERA_BALANCER_ROUND_INTERVAL_MS: '500', TESSERA_ORPHAN_CLEANUP_DELAY_SECS: '0' },
  });
  ({ config, api, catalog } = started);
});

afterAll(async () => started?.stop());

const DOCUMENTS = 3000;
const pad = 'p'.repeat(400);

interface RoundDetails {
  startedAt: string;
  durationMs: number;
  throttleTimeMillis: number;
  migrations: Array<{ ns: string; from: string; to: string; reason: string; outcome: string }>;
}

/** A collection auto-split on `primary` only: its database's primary shard, with the balancer off. */
async function loadOnto(db: string, primary: string): Promise<string> {
  const ns = `${db}.items`;
  await config.enableSharding({ db, primaryShard: primary });
  await config.shardCollection({ ns, key: { x: 1 } });
  await config.configureCollectionBalancing({ ns, chunkSizeBytes: 64 * 1024 });
  for (let batch = 0; batch < DOCUMENTS / 250; batch++) {
    const documents = Array.from({ length: 250 }, (_, i) => ({ _id: batch * 250 + i, x: Math.floor(Math.random() * 1e9), pad }));
    const answer = await api.call('POST', `/v1/${db}/items/insert`, { documents });
    expect(answer.status).toBe(200);
  }
  return ns;
}

describe('the continuous balancer scheduler', () => {
  it('plans the next migration of a freed pair of shards while another pair still migrates', async () => {
    await config.updateSettings({ balancer: { mode: 'off' } });
    expect((await config.settings()).balancer.scheduler).toBe('continuous');
    const collections = [await loadOnto('cont0', 'shard0'), await loadOnto('cont1', 'shard1')];
    const since = (await catalog.query<{ id: string }>('SELECT COALESCE(MAX(id), 0) AS id FROM changelog')).rows[0]!.id;

    // Two donors (shard0, shard1) and two empty shards: two migrations can run at once.
    await config.updateSettings({ balancer: { mode: 'full' } });
    await eventually(
      async () => {
        for (const ns of collections) {
          const shards = new Set((await config.getChunks({ ns })).chunks.map((c) => c.shard));
          if (shards.size < 3 || !(await config.balancerCollectionStatus(ns)).balancerCompliant) return undefined;
        }
        return true;
      },
      'both collections spread and compliant',
      90_000,
    );

    const rounds = (
      await catalog.query<{ details: RoundDetails }>(
        "SELECT details FROM changelog WHERE what = 'balancer.round' AND id > $1 ORDER BY id",
        [since],
      )
    ).rows.map((r) => r.details);
    const moved = rounds.flatMap((r) => r.migrations).filter((m) => m.outcome === 'moved');
    expect(new Set(moved.map((m) => m.ns))).toEqual(new Set(collections));
    // No fixed throttle between migrations under this scheduler.
    expect(rounds.every((r) => r.throttleTimeMillis === 0)).toBe(true);
    // A round started while an earlier one's migrations were still under way.
    expect(overlappingRounds(rounds).length).toBeGreaterThan(0);

    for (const [n, ns] of collections.entries()) {
      const all = await api.findAll(ns, { filter: {} });
      expect(all, `cont${n}`).toHaveLength(DOCUMENTS);
    }
  }, 150_000);

  it('drains one donor into three shards at once, each recipient receiving one migration at a time', async () => {
    await config.updateSettings({ balancer: { mode: 'off' } });
    expect((await config.settings()).balancer.maxDonationsPerShard).toBe(0);
    const ns = await loadOnto('par', 'shard3');
    const since = (await catalog.query<{ id: string }>('SELECT COALESCE(MAX(id), 0) AS id FROM changelog')).rows[0]!.id;
    await config.updateSettings({ balancer: { mode: 'full' } });
    await eventually(
      async () => {
        const shards = new Set((await config.getChunks({ ns })).chunks.map((c) => c.shard));
        return shards.size === 4 && (await config.balancerCollectionStatus(ns)).balancerCompliant ? true : undefined;
      },
      'the collection spread over the four shards',
      90_000,
    );
    const summaries = (
      await catalog.query<{ details: DonorSummary }>(
        "SELECT details FROM changelog WHERE what = 'moveChunk.from' AND ns = $1 AND id > $2",
        [ns, since],
      )
    ).rows.map((r) => r.details);
    const parallel = overlappingMigrations(summaries, 'donor');
    console.log(`parallel donations: ${summaries.length} migrations, ${parallel.length} overlapping pairs on one donor`);
    expect(parallel.length).toBeGreaterThan(0);
    expect(parallel.every(([a, b]) => a.from === 'shard3' && a.to !== b.to)).toBe(true);
    expect(overlappingMigrations(summaries, 'recipient')).toEqual([]);
    expect(await api.findAll(ns, { filter: {} })).toHaveLength(DOCUMENTS);
  }, 150_000);
});
