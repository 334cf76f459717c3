import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConfigClient } from '@tessera/protocol';
import { FAST_CONFIG_ENV, eventually, overlappingRounds } from './helpers.js';
import { RouterApi } from './router-api.js';
import { type RoutedTestCluster, startRoutedTestCluster } from './test-cluster.js';

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
  // MongoDB's rounds and throttle, which this file checks; balancer-continuous.e2e.spec.ts checks the default.
  await config.updateSettings({ balancer: { scheduler: 'rounds' } });
});

afterAll(async () => started?.stop());

const NS = 'bal.random';
const DOCUMENTS = 3750;
const pad = 'p'.repeat(400);

interface RoundDetails {
  startedAt: string;
  migrations: Array<{ reason: string; outcome: string }>;
  why?: string;
  durationMs: number;
  selectionTimeMillis: number;
  throttleTimeMillis: number;
  migrationTimeMillis: number;
}

async function timedRounds(): Promise<Array<{ time: Date; details: RoundDetails }>> {
  const result = await catalog.query<{ time: Date; details: RoundDetails }>(
    "SELECT time, details FROM changelog WHERE what = 'balancer.round' ORDER BY id",
  );
  return result.rows;
}

async function rounds(): Promise<RoundDetails[]> {
  return (await timedRounds()).map((r) => r.details);
}

describe('the balancer', () => {
  it('spreads a collection that auto-split on one shard over all three until it is compliant, losing no document', async () => {
    const started = Date.now();
    await config.shardCollection({ ns: NS, key: { x: 1 } });
    await config.configureCollectionBalancing({ ns: NS, chunkSizeBytes: 64 * 1024 });
    // A first write makes the shard read the collection's chunk size.
    await api.call('POST', '/v1/bal/random/insert', { documents: [{ _id: 0, x: 500_000_000, pad }] });
    await new Promise((resolve) => setTimeout(resolve, 500));
    // ~1.5 MB of random keys.
    for (let batch = 0; batch < 15; batch++) {
      const documents = Array.from({ length: 250 }, (_, i) => ({
        _id: batch * 250 + i + 1,
        x: Math.floor(Math.random() * 1e9),
        pad,
      })).slice(0, batch === 14 ? 249 : 250);
      const answer = await api.call('POST', '/v1/bal/random/insert', { documents });
      expect(answer.status).toBe(200);
    }
    const inserted = Date.now();

    await eventually(
      async () => {
        const shards = new Set((await config.getChunks({ ns: NS })).chunks.map((c) => c.shard));
        if (shards.size < 3) return undefined;
        return (await config.balancerCollectionStatus(NS)).balancerCompliant ? true : undefined;
      },
      'chunks on all three shards and the collection compliant',
      60_000,
    );
    const balanced = Date.now();
    console.log(`inserted in ${inserted - started} ms, balanced ${balanced - inserted} ms later`);

    const all = await api.findAll(NS, { filter: {} });
    expect(all).toHaveLength(DOCUMENTS);
    expect(new Set(all.map((d) => (d as { _id: number })._id)).size).toBe(DOCUMENTS);

    const moved = (await rounds()).flatMap((r) => r.migrations).filter((m) => m.outcome === 'moved');
    expect(moved.length).toBeGreaterThan(0);
    expect(moved.every((m) => m.reason === 'imbalance')).toBe(true);

    // MongoDB's pacing: after a round that issued migrations the next starts at once, and its
    // migrations wait until balancerMigrationsThrottlingMs (1 s by default) after the previous
    // round's ended, its snapshot and selection counting toward it. (A row's time is its insert,
    // just after the round ended.)
    const timed = await timedRounds();
    const consecutive = timed
      .slice(1)
      .map((next, i) => [timed[i]!, next] as const)
      .filter(([previous, next]) => previous.details.migrations.length > 0 && next.details.migrations.length > 0);
    expect(consecutive.length).toBeGreaterThan(0);
    for (const [previous, next] of consecutive) {
      const gap = next.time.getTime() - next.details.durationMs - previous.time.getTime();
      // Far below the 10 s a round waits after one that issued nothing, with room for a slow machine.
      expect(gap, 'the next round starts at once').toBeLessThan(5_000);
      expect(next.details.selectionTimeMillis + next.details.throttleTimeMillis + gap, 'the throttle').toBeGreaterThanOrEqual(800);
      expect(next.details.migrationTimeMillis).toBeGreaterThan(0);
    }
    // Each round waited for all its migrations: none started while another was under way.
    expect(overlappingRounds(await rounds())).toEqual([]);

    const status = await config.balancerStatus();
    expect(status.mode).toBe('full');
    expect(status.lastRound).not.toBeNull();
  }, 90_000);

  it('starts no round once the balancer is off', async () => {
    await config.updateSettings({ balancer: { mode: 'off' } });
    await eventually(async () => ((await config.balancerStatus()).inBalancerRound ? undefined : true), 'the running round to end');
    const before = await config.balancerStatus();
    const rowsBefore = (await rounds()).length;
    await new Promise((resolve) => setTimeout(resolve, 2500));
    const after = await config.balancerStatus();
    expect(after.mode).toBe('off');
    expect(after.lastRound?.startedAt).toBe(before.lastRound?.startedAt);
    expect((await rounds()).length).toBe(rowsBefore);
    await config.updateSettings({ balancer: { mode: 'full' } });
  }, 20_000);
});
