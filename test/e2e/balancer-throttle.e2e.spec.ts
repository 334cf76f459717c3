import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { THROTTLED_CLONE_BATCH_DOCUMENTS } from '@tessera/core';
import type { ConfigClient } from '@tessera/protocol';
import { FAST_CONFIG_ENV, eventually } from './helpers.js';
import { RouterApi } from './router-api.js';
import { type RoutedTestCluster, startRoutedTestCluster } from './test-cluster.js';

let started: RoutedTestCluster;
let config: ConfigClient;
let api: RouterApi;
let catalog: pg.Pool;

// A target multiple of 0.01: any window with writes and a migration running is over it, so the
// throttle's decisions are certain rather than a matter of this machine's load.
beforeAll(async () => {
  started = await startRoutedTestCluster({
    shards: 1,
    spareShards: 1,
    env: {
      ...FAST_CONFIG_ENV,
      TESSERA_BALANCER_ROUND_INTERVAL_MS: '500',
      TESSERA_BALANCER_TARGET_LATENCY_MULTIPLE: '0.01',
      TESSERA_BALANCER_LOAD_POLL_MS: '200',
      TESSERA_ROUTER_LOAD_REPORT_INTERVAL_MS: '200',
    },
  });
  ({ config, api, catalog } = started);
});

afterAll(async () => started?.stop());

const NS = 'thr.items';
const pad = 'p'.repeat(400);

interface Row {
  what: string;
  details: Record<string, unknown>;
}

/** Inserts one document at a time on `loops` loops until `stop`; answers the acknowledged ids and every failure. */
async function insertUntil(stop: () => boolean, firstId: number, loops = 4): Promise<{ ids: number[]; failures: string[] }> {
  const ids: number[] = [];
  const failures: string[] = [];
  let next = firstId;
  await Promise.all(
    Array.from({ length: loops }, async () => {
      while (!stop()) {
        const _id = next++;
        const answer = await api.call('POST', '/v1/thr/items/insert', { documents: [{ _id, x: Math.floor(Math.random() * 1e9), pad }] });
        const body = answer.json as { insertedCount?: number; writeErrors?: unknown[] };
        if (answer.status === 200 && body.insertedCount === 1) ids.push(_id);
        else failures.push(`${_id}: HTTP ${answer.status} ${JSON.stringify(answer.json).slice(0, 200)}`);
      }
    }),
  );
  return { ids, failures };
}

describe("the continuous scheduler's load throttle", () => {
  it('slows migrations while the writes suffer, records why, and returns to full speed once they stop', async () => {
    await config.shardCollection({ ns: NS, key: { x: 1 } });
    await config.configureCollectionBalancing({ ns: NS, chunkSizeBytes: 64 * 1024 });
    const since = (await catalog.query<{ id: string }>('SELECT COALESCE(MAX(id), 0) AS id FROM changelog')).rows[0]!.id;

    // One shard: nothing to balance while the routers' reports teach the throttle the idle p99.
    let stop = false;
    const load = insertUntil(() => stop, 0);
    await eventually(async () => ((await config.balancerStatus()).throttle.idleWriteP99Ms !== null ? true : undefined), 'an idle p99');

    const spare = started.cluster.node('shard1');
    await config.addShard({ name: 'shard1', url: spare.url });
    await eventually(
      async () => ((await config.getChunks({ ns: NS })).chunks.filter((c) => c.shard === 'shard1').length >= 3 ? true : undefined),
      'three chunks on the new shard',
      60_000,
    );
    const throttled = await config.balancerStatus();
    // A migration started while throttled was cloned in small batches with a wait after each. Its
    // donor reports it after the commit, so the load goes on until the report is in.
    const paced = await eventually(
      async () => {
        const found = await catalog.query<{ details: { clonePacing: { batchDocuments: number; waitRatio: number } } }>(
          "SELECT details FROM changelog WHERE id > $1 AND what = 'moveChunk.from' AND details ? 'clonePacing'",
          [since],
        );
        return found.rows[0];
      },
      'a paced migration',
      60_000,
    );
    // A top chunk's move meets the same gate: asked while the gate is closed, it is skipped.
    await eventually(
      async () => {
        const last = (await config.getChunks({ ns: NS })).chunks.at(-1)!;
        const answer = await config.moveTopChunk({ ns: NS, range: last.range, shard: last.shard });
        return answer.outcome === 'skipped' && answer.why === 'throttled' ? true : undefined;
      },
      'a top chunk move skipped by the throttle',
      30_000,
    );
    stop = true;
    const { ids, failures } = await load;
    expect(failures).toEqual([]);

    const rows = (
      await catalog.query<Row>(
        "SELECT what, details FROM changelog WHERE id > $1 AND what IN ('balancer.throttle', 'balancer.round') ORDER BY id",
        [since],
      )
    ).rows;
    const decisions = rows.filter((r) => r.what === 'balancer.throttle').map((r) => r.details);
    const held = rows.filter((r) => r.what === 'balancer.round' && r.details.held !== undefined);
    console.log(
      `throttle e2e: ${ids.length} inserts; ${decisions.length} throttle changes, first ${JSON.stringify(decisions[0])}; ` +
        `${held.length} rounds held migrations; status while loaded ${JSON.stringify(throttled.throttle)}`,
    );
    expect(decisions[0]).toMatchObject({ state: 'throttled', targetLatencyMultiple: 0.01 });
    expect(String(decisions[0]!.reason)).toMatch(/^write p99 \d+ ms over 0\.01 x its idle \d+ ms$/);
    // While throttled, a round that planned a migration held it back and said why.
    expect(rows.some((r) => r.what === 'balancer.round' && typeof (r.details.held as { why?: string } | undefined)?.why === 'string')).toBe(
      true,
    );
    expect(throttled.throttle.targetLatencyMultiple).toBe(0.01);
    expect(paced.details.clonePacing).toMatchObject({ batchDocuments: THROTTLED_CLONE_BATCH_DOCUMENTS, waitRatio: expect.any(Number) });
    expect(paced.details.clonePacing.waitRatio).toBeGreaterThanOrEqual(1);

    // No write left: the throttle lets the balancer go at full speed, and says so.
    await eventually(async () => ((await config.balancerStatus()).throttle.state === 'fullSpeed' ? true : undefined), 'full speed');
    const after = await catalog.query<Row>("SELECT what, details FROM changelog WHERE id > $1 AND what = 'balancer.throttle' ORDER BY id", [
      since,
    ]);
    expect(after.rows.at(-1)!.details).toMatchObject({ state: 'fullSpeed', reason: null });

    const stored = (await api.findAll(NS, { filter: {} })) as Array<{ _id: number }>;
    expect(new Set(stored.map((d) => d._id))).toEqual(new Set(ids));
  }, 180_000);
});
