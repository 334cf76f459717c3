import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConfigClient, WireChunk } from '@tessera/protocol';
import { FAST_CONFIG_ENV, eventually } from './helpers.js';
import { RouterApi } from './router-api.js';
import { type RoutedTestCluster, startRoutedTestCluster } from './test-cluster.js';

/**
 * The balancer beyond chunk selection, on real processes: jumbo handling (a chunk refused as too
 * big is split, else marked jumbo; `attemptToBalanceJumboChunks` moves it with forceJumbo),
 * the auto-merger, and defragmentation, each with its reason in the changelog.
 */

let started: RoutedTestCluster;
let config: ConfigClient;
let api: RouterApi;
let catalog: pg.Pool;

beforeAll(async () => {
  started = await startRoutedTestCluster({
    shards: 2,
    env: {
      ...FAST_CONFIG_ENV,
      TESSERA_BALANCER_ROUND_INTERVAL_MS: '500',
      TESSERA_BALANCER_MIGRATIONS_THROTTLING_MS: '100',
      TESSERA_ORPHAN_CLEANUP_DELAY_SECS: '0',
      TESSERA_AUTO_MERGER_INTERVAL_SECS: '1',
      TESSERA_AUTO_MERGER_THROTTLING_MS: '100',
      TESSERA_MIN_SNAPSHOT_HISTORY_WINDOW_SECS: '0',
      TESSERA_TRANSACTION_LIFETIME_LIMIT_SECS: '0',
      TESSERA_DEFRAGMENTATION_THROTTLING_MS: '20',
    },
  });
  ({ config, api, catalog } = started);
  // Chunks here grow only by the balancer's own splits.
  await config.updateSettings({ autoSplit: false });
});

afterAll(async () => started?.stop());

const pad = 'p'.repeat(400);

interface Row {
  what: string;
  details: Record<string, unknown>;
}

async function changelog(ns: string, what: string): Promise<Row[]> {
  return (await catalog.query<Row>('SELECT what, details FROM changelog WHERE ns = $1 AND what = $2 ORDER BY id', [ns, what])).rows;
}

async function chunksOf(ns: string): Promise<WireChunk[]> {
  return (await config.getChunks({ ns })).chunks;
}

/** Shards `ns` on x with 64 KiB chunks and splits its one chunk at `points`; balancing and the auto-merger as asked. */
async function createCollection(
  ns: string,
  points: number[],
  options: { enableBalancing: boolean; enableAutoMerger: boolean },
): Promise<void> {
  await config.shardCollection({ ns, key: { x: 1 } });
  await config.configureCollectionBalancing({ ns, chunkSizeBytes: 64 * 1024, ...options });
  const { epoch, timestamp, chunks } = await config.getChunks({ ns });
  const chunk = chunks[0]!;
  await config.commitSplit({
    ns,
    expectedCollectionVersion: { epoch, timestamp },
    shard: chunk.shard,
    range: chunk.range,
    splitPoints: points.map((p) => [p]),
  });
}

/** Inserts through the router, 200 documents a request. */
async function insert(ns: string, documents: Array<Record<string, unknown>>): Promise<void> {
  await api.insertMany(ns, documents, 200);
}

/** `count` documents with shard key `x(i)` and ids from `firstId`. */
const docs = (count: number, firstId: number, x: (i: number) => number) =>
  Array.from({ length: count }, (_, i) => ({ _id: firstId + i, x: x(i), pad }));

describe('jumbo chunks', () => {
  it('moves a chunk over the size limit with forceJumbo when attemptToBalanceJumboChunks is set', async () => {
    const ns = 'sec.force';
    await config.updateSettings({ balancer: { attemptToBalanceJumboChunks: true } });
    await createCollection(ns, [10], { enableBalancing: false, enableAutoMerger: false });
    // [MinKey, 10): 400 documents of one key (~180 KB, over twice the 64 KiB max); [10, MaxKey): ~220 KB.
    await insert(ns, [...docs(400, 0, () => 5), ...docs(500, 1000, (i) => 10 + i)]);
    await config.configureCollectionBalancing({ ns, enableBalancing: true });
    await eventually(async () => ((await chunksOf(ns)).some((c) => c.shard !== 'shard0') ? true : undefined), 'a chunk to move', 20_000);
    const commits = await changelog(ns, 'moveChunk.commit');
    expect(commits[0]?.details).toMatchObject({ reason: 'imbalance', donor: 'shard0', recipient: 'shard1' });
    expect((commits[0]?.details.chunk as { range: { min: unknown } }).range.min).toMatchObject([{ $minKey: 1 }]);
    expect(await changelog(ns, 'markJumbo')).toEqual([]);
    await config.updateSettings({ balancer: { attemptToBalanceJumboChunks: false } });
  }, 40_000);

  it('splits a chunk refused as too big, or marks it jumbo when all its documents share one key, and clearJumboFlag clears it', async () => {
    const ns = 'sec.jumbo';
    await createCollection(ns, [10], { enableBalancing: false, enableAutoMerger: false });
    await insert(ns, [...docs(400, 0, () => 5), ...docs(500, 1000, (i) => 10 + i)]);
    await config.configureCollectionBalancing({ ns, enableBalancing: true });

    const jumbo = await eventually(
      async () => (await chunksOf(ns)).find((c) => c.jumbo === true),
      'the one-key chunk to be marked jumbo',
      20_000,
    );
    expect(jumbo.range.max).toEqual([10]);
    await eventually(
      async () =>
        (await changelog(ns, 'split')).some((r) => r.details.reason === 'chunkTooBig') ||
        (await changelog(ns, 'multi-split')).some((r) => r.details.reason === 'chunkTooBig')
          ? true
          : undefined,
      'the other chunk, refused as too big, to be split',
      20_000,
    );
    // A round's row is written when the round ends, after the splits it made are in the changelog.
    const wanted = expect.arrayContaining([
      expect.objectContaining({ reason: 'chunkTooBig', outcome: 'markedJumbo' }),
      expect.objectContaining({ reason: 'chunkTooBig', outcome: 'split' }),
    ]);
    await eventually(async () => {
      const rounds = (
        await catalog.query<{ details: { splits?: Array<{ ns: string; reason: string; outcome: string }> } }>(
          "SELECT details FROM changelog WHERE what = 'balancer.round' ORDER BY id",
        )
      ).rows;
      const outcomes = rounds.flatMap((r) => r.details.splits ?? []).filter((s) => s.ns === ns);
      return wanted.asymmetricMatch(outcomes) ? true : undefined;
    }, "the rounds' rows to report the jumbo mark and the split");
    // The pieces spread; the jumbo chunk stays where it is.
    await eventually(async () => ((await chunksOf(ns)).some((c) => c.shard === 'shard1') ? true : undefined), 'a piece to move', 20_000);
    expect((await chunksOf(ns)).find((c) => c.jumbo === true)?.shard).toBe('shard0');

    // clearJumboFlag is reachable and clears it.
    await config.configureCollectionBalancing({ ns, enableBalancing: false });
    const { epoch, timestamp, collectionVersion } = await config.getChunks({ ns });
    expect(epoch).toBe(collectionVersion.epoch);
    await config.clearJumbo({ ns, expectedCollectionVersion: { ...collectionVersion, timestamp }, range: jumbo.range });
    expect((await chunksOf(ns)).some((c) => c.jumbo === true)).toBe(false);
    expect(await changelog(ns, 'clearJumboFlag')).toHaveLength(1);

    const all = (await api.findAll(ns, { filter: {} })) as Array<{ _id: number }>;
    expect(new Set(all.map((d) => d._id)).size).toBe(900);
    expect(all).toHaveLength(900);
  }, 60_000);
});

describe('zones', () => {
  it('splits a chunk at the bounds of a zone range (zoneBoundary) and moves the piece to the zone (zoneViolation)', async () => {
    const ns = 'sec.zones';
    await config.shardCollection({ ns, key: { x: 1 } });
    await insert(
      ns,
      docs(60, 0, (i) => i * 5),
    );
    await config.addShardToZone({ shard: 'shard1', zone: 'z' });
    await config.updateZoneKeyRange({ ns, min: { x: 100 }, max: { x: 200 }, zone: 'z' });
    const piece = await eventually(
      async () => (await chunksOf(ns)).find((c) => c.range.min[0] === 100 && c.range.max[0] === 200 && c.shard === 'shard1'),
      'the zone range to be a chunk on shard1',
      20_000,
    );
    expect(piece).toBeDefined();
    const splits = [...(await changelog(ns, 'split')), ...(await changelog(ns, 'multi-split'))];
    expect(splits.some((r) => r.details.reason === 'zoneBoundary')).toBe(true);
    expect((await changelog(ns, 'moveChunk.commit')).map((r) => r.details.reason)).toContain('zoneViolation');
    expect(await config.balancerCollectionStatus(ns)).toMatchObject({ balancerCompliant: true });
    expect(await api.findAll(ns, { filter: {} })).toHaveLength(60);
  }, 30_000);
});

describe('the auto-merger', () => {
  it('merges contiguous chunks of one shard into one, with reason autoMerge, but never into a chunk over the max chunk size', async () => {
    // First a collection whose chunks hold ~40 KB each: two of them would pass the 64 KiB max, so none merge.
    const capped = 'sec.capped';
    await config.shardCollection({ ns: capped, key: { x: 1 } });
    await config.configureCollectionBalancing({ ns: capped, chunkSizeBytes: 64 * 1024, enableBalancing: false });
    await insert(
      capped,
      docs(360, 5000, (i) => Math.floor(i / 90) * 100 + (i % 90)),
    );
    const {
      epoch,
      timestamp,
      chunks: [whole],
    } = await config.getChunks({ ns: capped });
    await config.commitSplit({
      ns: capped,
      expectedCollectionVersion: { epoch, timestamp },
      shard: whole!.shard,
      range: whole!.range,
      splitPoints: [[100], [200], [300]],
    });

    const ns = 'sec.merge';
    await createCollection(ns, [10, 20, 30, 40], { enableBalancing: false, enableAutoMerger: true });
    await insert(
      ns,
      docs(50, 0, (i) => i),
    );
    await eventually(async () => ((await chunksOf(ns)).length === 1 ? true : undefined), 'the five chunks to be merged into one', 20_000);
    const merges = await changelog(ns, 'merge');
    expect(merges.length).toBeGreaterThan(0);
    expect(merges.every((r) => r.details.reason === 'autoMerge')).toBe(true);
    expect(await api.findAll(ns, { filter: {} })).toHaveLength(50);
    // The pass that merged sec.merge saw sec.capped split too, and merged none of it.
    expect(await chunksOf(capped)).toHaveLength(4);
    expect(await changelog(capped, 'merge')).toEqual([]);
  }, 30_000);
});

describe('defragmentation', () => {
  it('merges and moves small chunks until few remain, phase by phase, then stops', async () => {
    const ns = 'sec.defrag';
    await createCollection(ns, [10, 20, 30, 40, 50, 60, 70], { enableBalancing: false, enableAutoMerger: false });
    await insert(
      ns,
      docs(80, 0, (i) => i),
    );
    // Every other chunk on shard1, so nothing is mergeable before chunks move.
    for (const min of [10, 30, 50, 70])
      await config.moveRange({ ns, min: { x: min }, toShard: 'shard1', forceJumbo: false, waitForDelete: false });
    expect(await chunksOf(ns)).toHaveLength(8);

    await config.configureCollectionBalancing({ ns, defragmentCollection: true });
    expect(await config.balancerCollectionStatus(ns)).toEqual({
      balancerCompliant: false,
      firstComplianceViolation: 'defragmentingChunks',
    });
    await eventually(
      async () => ((await changelog(ns, 'balancer.defragmentation')).some((r) => r.details.phase === 'finished') ? true : undefined),
      'defragmentation to finish',
      40_000,
    );
    const chunks = await chunksOf(ns);
    expect(chunks.length).toBeLessThanOrEqual(2);
    const phases = (await changelog(ns, 'balancer.defragmentation')).map((r) => r.details.phase);
    // A phase with nothing to do is passed through without a row of its own (here, often mergeChunks).
    expect(phases[0]).toBe('mergeAndMeasureChunks');
    expect(phases).toContain('moveAndMergeChunks');
    expect(phases[phases.length - 1]).toBe('finished');
    expect((await changelog(ns, 'merge')).every((r) => r.details.reason === 'defragmentation')).toBe(true);
    expect((await changelog(ns, 'moveChunk.commit')).filter((r) => r.details.reason === 'defragmentation').length).toBeGreaterThan(0);
    expect((await config.balancerCollectionStatus(ns)).firstComplianceViolation).not.toBe('defragmentingChunks');
    expect(await api.findAll(ns, { filter: {} })).toHaveLength(80);
  }, 60_000);
});
