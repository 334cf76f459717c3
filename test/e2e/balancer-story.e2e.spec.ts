import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConfigClient } from '@tessera/protocol';
import { FAST_CONFIG_ENV, eventually } from './helpers.js';
import { RouterApi } from './router-api.js';
import { type RoutedTestCluster, startRoutedTestCluster } from './test-cluster.js';

/**
 * Issue 7's story, end to end on real processes: a client inserts increasing keys, then random
 * keys, into a collection with 256 KiB chunks on 3 shards. Chunks split, the top chunk keeps
 * moving off the shard that split it, the balancer spreads the data until the collection is
 * compliant, every document reads back once, and the changelog tells why each thing happened.
 */

let started: RoutedTestCluster;
let config: ConfigClient;
let api: RouterApi;
let catalog: pg.Pool;

beforeAll(async () => {
  started = await startRoutedTestCluster({
    shards: 3,
    env: {
      ...FAST_CONFIG_ENV,
      TESSERA_BALANCER_ROUND_INTERVAL_MS: '1000',
      TESSERA_BALANCER_MIGRATIONS_THROTTLING_MS: '200',
      TESSERA_ORPHAN_CLEANUP_DELAY_SECS: '0',
    },
  });
  ({ config, api, catalog } = started);
});

afterAll(async () => started?.stop());

const NS = 'story.events';
const pad = 'p'.repeat(400);
const INCREASING = 2000;
const RANDOM = 2000;

interface ChangelogRow {
  what: string;
  shard: string | null;
  details: Record<string, unknown>;
}

async function changelog(ns: string): Promise<ChangelogRow[]> {
  const result = await catalog.query<ChangelogRow>(
    "SELECT what, shard, details FROM changelog WHERE ns = $1 OR (what = 'balancer.round' AND details::text LIKE '%' || $1 || '%') ORDER BY id",
    [ns],
  );
  return result.rows;
}

function countBy(values: string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const value of values) counts[value] = (counts[value] ?? 0) + 1;
  return counts;
}

async function insert(documents: Array<Record<string, unknown>>): Promise<void> {
  const answer = await api.call('POST', '/v1/story/events/insert', { documents });
  expect(answer.status).toBe(200);
  expect(answer.json).toMatchObject({ insertedCount: documents.length });
}

describe('the balancer story', () => {
  it('splits, moves top chunks, spreads to compliance, loses nothing, and the changelog says why', async () => {
    const started = Date.now();
    await config.shardCollection({ ns: NS, key: { x: 1 } });
    await config.configureCollectionBalancing({ ns: NS, chunkSizeBytes: 256 * 1024 });
    // A first write makes the shard read the collection's chunk size.
    await insert([{ _id: 0, x: 0, pad }]);
    await new Promise((resolve) => setTimeout(resolve, 500));

    // Increasing keys: every write lands in the top chunk, wherever it is.
    for (let batch = 0; batch < INCREASING / 100; batch++) {
      await insert(
        Array.from({ length: 100 }, (_, i) => ({ _id: batch * 100 + i + 1, x: batch * 100 + i + 1, pad })).slice(
          0,
          batch === INCREASING / 100 - 1 ? 99 : 100,
        ),
      );
    }
    // Then random keys over twice the range written so far.
    for (let batch = 0; batch < RANDOM / 100; batch++) {
      await insert(Array.from({ length: 100 }, (_, i) => ({ _id: INCREASING + batch * 100 + i, x: Math.random() * 2 * INCREASING, pad })));
    }
    const inserted = Date.now();

    // The last state seen goes into the failure message, so a run that does not converge says where it stuck.
    let lastSeen = '';
    const shardsHolding = await eventually(
      async () => {
        const placement = (await config.getChunks({ ns: NS })).chunks.map((c) => c.shard);
        const status = await config.balancerCollectionStatus(NS);
        const recent = (await changelog(NS)).slice(-8).map((r) => `${r.what}${r.shard ? `@${r.shard}` : ''}`);
        lastSeen = `chunks per shard ${JSON.stringify(countBy(placement))}, status ${JSON.stringify(status)}, last changelog ${recent.join(' ')}`;
        const shards = new Set(placement);
        return shards.size === 3 && status.balancerCompliant ? shards : undefined;
      },
      'chunks on all three shards and the collection compliant',
      90_000,
    ).catch((error: Error) => {
      throw new Error(`${error.message}; last seen: ${lastSeen}`);
    });
    expect(shardsHolding.size).toBe(3);
    const chunks = (await config.getChunks({ ns: NS })).chunks;
    console.log(
      `story: inserted ${INCREASING + RANDOM} documents in ${inserted - started} ms; ${chunks.length} chunks, compliant ${Date.now() - inserted} ms later`,
    );

    // Every document readable exactly once.
    const all = (await api.findAll(NS, { filter: {} })) as Array<{ _id: number }>;
    expect(all).toHaveLength(INCREASING + RANDOM);
    expect(new Set(all.map((d) => d._id)).size).toBe(INCREASING + RANDOM);

    // The changelog tells the story.
    const rows = await changelog(NS);
    const splits = rows.filter((r) => r.what === 'split' || r.what === 'multi-split');
    expect(splits.some((r) => r.details.reason === 'topChunk')).toBe(true);
    expect(splits.every((r) => ['topChunk', 'autoSplit', 'chunkTooBig'].includes(r.details.reason as string))).toBe(true);
    const topChunkMoves = rows.filter((r) => r.what === 'balancer.topChunk');
    expect(topChunkMoves.some((r) => r.details.outcome === 'moved')).toBe(true);
    const commits = rows.filter((r) => r.what === 'moveChunk.commit');
    expect(commits.some((r) => r.details.reason === 'topChunk')).toBe(true);
    // Every migration was the balancer's, and says why.
    expect(commits.every((r) => ['topChunk', 'imbalance'].includes(r.details.reason as string))).toBe(true);
    const roundMoves = rows
      .filter((r) => r.what === 'balancer.round')
      .flatMap((r) => r.details.migrations as Array<{ ns: string; reason: string; outcome: string }>)
      .filter((m) => m.ns === NS);
    expect(roundMoves.every((m) => m.reason === 'imbalance')).toBe(true);
    const story = commits.map((r) => `${r.details.donor as string}->${r.details.recipient as string}:${r.details.reason as string}`);
    console.log(`story: ${splits.length} splits, ${commits.length} migrations: ${story.join(' ')}`);
  }, 120_000);
});
