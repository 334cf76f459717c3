/**
 * The config server's round and the simulator's run the same planner: one recorded snapshot of
 * the catalog, loaded the way the round service loads it (ClusterStatisticsService over the
 * catalog store and the shards' statsForBalancing) and planned through the service's seam, gives
 * the same actions as the simulator's first round from the same chunks.
 */
import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import { describe, expect, it } from 'vitest';
import {
  type MigrationPlan,
  type ShardStatistics,
  type SizedChunk,
  type SplitPlan,
  type ZoneRange,
  compareShardKeys,
  decodeKey,
  simulateFirstRound,
  splitRange,
} from '@tessera/core';
import { type ClusterSettings, DEFAULT_CLUSTER_SETTINGS } from '@tessera/protocol';
import type { InternalClients } from '@tessera/platform';
import { type ChunkRow, type CollectionRow, chunkFromRow, generationOfRow } from '../catalog/catalog-rows.js';
import type { BalancerCatalogStore, ShardRow } from './balancer-catalog.store.js';
import { planRound, planRoundSplits } from './balancer-round.js';
import { ClusterStatisticsService } from './cluster-statistics.service.js';

type HexChunkRow = Omit<ChunkRow, 'min' | 'max'> & { min: string; max: string };

interface RecordedCluster {
  clusterSettings: { chunkSizeBytes: number };
  shards: ShardRow[];
  collections: CollectionRow[];
  chunks: HexChunkRow[];
  tags: Array<{ ns: string; min: string; max: string; tag: string }>;
  statsForBalancing: Record<string, Record<string, number>>;
}

const recorded = JSON.parse(readFileSync(new URL('./fixtures/recorded-cluster.json', import.meta.url), 'utf8')) as RecordedCluster;
const row = recorded.collections[0]!;

function chunksOf(collection: CollectionRow): SizedChunk[] {
  return recorded.chunks
    .filter((c) => c.collection_uuid === collection.uuid)
    .map((c) => ({
      ...chunkFromRow({ ...c, min: Buffer.from(c.min, 'hex'), max: Buffer.from(c.max, 'hex') }, generationOfRow(collection)),
      ...(c.estimated_size_bytes === null ? {} : { estimatedSizeBytes: Number(c.estimated_size_bytes) }),
    }));
}

/** The chunks as the catalog holds them once `splits` are committed: each split chunk in pieces, unsized. */
function afterSplits(chunks: SizedChunk[], splits: readonly SplitPlan[]): SizedChunk[] {
  return chunks.flatMap((chunk) => {
    const split = splits.find((s) => compareShardKeys(s.range.min, chunk.range.min) === 0);
    if (split === undefined) return [chunk];
    return splitRange(chunk.range, split.splitPoints).map((range) => ({ ...chunk, range, estimatedSizeBytes: undefined }));
  });
}

function zonesOf(ns: string): ZoneRange[] {
  return recorded.tags
    .filter((t) => t.ns === ns)
    .map((t) => ({ range: { min: decodeKey(Buffer.from(t.min, 'hex')), max: decodeKey(Buffer.from(t.max, 'hex')) }, zone: t.tag }));
}

/**
 * The catalog store and the shards' statsForBalancing, answering from the recording, with the
 * zone-boundary splits committed so far (the round service commits them and reads again).
 */
function recordedStatistics(committed: readonly SplitPlan[] = []): ClusterStatisticsService {
  const catalog: Pick<BalancerCatalogStore, 'shards' | 'balancedCollections' | 'chunks' | 'zones'> = {
    shards: async () => recorded.shards,
    balancedCollections: async () => recorded.collections.filter((c) => c.balancing_enabled || c.defragment_collection),
    chunks: async (collection) => afterSplits(chunksOf(collection), committed),
    zones: async (ns) => zonesOf(ns),
  };
  const clients = {
    migration: (url: string) => ({
      statsForBalancing: async ({ namespaces }: { namespaces: string[] }) => {
        const shard = recorded.shards.find((s) => s.url === url)!.name;
        return { stats: namespaces.map((ns) => ({ ns, collSize: recorded.statsForBalancing[ns]?.[shard] ?? 0 })) };
      },
    }),
  };
  const logger = { warn: () => undefined } as unknown as Logger;
  return new ClusterStatisticsService(catalog as BalancerCatalogStore, clients as unknown as InternalClients, logger, {
    TESSERA_BALANCER_STATS_REFRESH_MS: 0,
  });
}

const NO_ROUNDS_YET = {
  defragmentation: new Map(),
  chunkCountInProgress: new Set<string>(),
  underWay: [],
  lastMigrationEndMs: null,
};

/** The round service's planning: snapshot, zone-boundary splits committed, snapshot again, plan. */
async function planAsTheService(settings: ClusterSettings) {
  const splits = planRoundSplits(await recordedStatistics().roundSnapshot(settings));
  const snapshot = await recordedStatistics(splits).roundSnapshot(settings);
  return { splits, errors: snapshot.errors, plan: planRound(snapshot, NO_ROUNDS_YET, settings, 1000, 0) };
}

/**
 * A migration without its size: after a split the service shares a shard's reported bytes among
 * its unsized chunks, while the simulator divides the split chunk's size between its pieces.
 */
const withoutSize = ({ estimatedSizeBytes: _, ...migration }: MigrationPlan) => migration;

describe('a recorded cluster snapshot planned by the config server and by the simulator', () => {
  it.each([
    { policy: 'dataSize', mode: 'dataSize' },
    { policy: 'chunkCount', mode: 'chunkCountThreshold' },
  ] as const)('gives the same splits, migrations and statuses under the $policy policy', async ({ policy, mode }) => {
    const settings: ClusterSettings = {
      ...DEFAULT_CLUSTER_SETTINGS,
      // One donation per shard, as the simulator's first round plans.
      balancer: { ...DEFAULT_CLUSTER_SETTINGS.balancer, policy, maxDonationsPerShard: 1 },
      chunkSizeBytes: recorded.clusterSettings.chunkSizeBytes,
    };
    const service = await planAsTheService(settings);

    const shards: ShardStatistics[] = recorded.shards.map((s) => ({ id: s.name, state: s.state, zones: s.zones }));
    const collection = {
      namespace: row.ns,
      chunks: chunksOf(row),
      zones: zonesOf(row.ns),
      maxChunkSizeBytes: settings.chunkSizeBytes,
      shardDataSizeBytes: recorded.statsForBalancing[row.ns],
    };
    const simulated = simulateFirstRound({ shards, collection, mode });

    expect(service.errors).toEqual([]);
    expect(service.splits.length).toBeGreaterThan(0);
    expect(service.plan.migrations.length).toBeGreaterThan(0);
    expect(simulated.splits).toEqual(service.splits);
    expect(simulated.migrations.map(withoutSize)).toEqual(service.plan.migrations.map(withoutSize));
    expect(simulated.statuses).toEqual(service.plan.statuses);
  });

  it('is a round with work of every kind: zone boundary splits, a drain onto a new shard, a zone violation', async () => {
    const settings = {
      ...DEFAULT_CLUSTER_SETTINGS,
      balancer: { ...DEFAULT_CLUSTER_SETTINGS.balancer, maxDonationsPerShard: 1 },
      chunkSizeBytes: recorded.clusterSettings.chunkSizeBytes,
    };
    const { splits, plan } = await planAsTheService(settings);
    expect(splits.map((s) => [s.shard, s.splitPoints])).toEqual([
      ['shard0', [[1000]]],
      ['shard2', [[2000]]],
    ]);
    expect(plan.migrations.map((m) => [m.reason, m.from, m.to])).toEqual([
      ['drain', 'shard3', 'shard4'],
      ['zoneViolation', 'shard2', 'shard0'],
    ]);
    expect(plan.statuses).toEqual([expect.objectContaining({ namespace: row.ns, firstComplianceViolation: 'draining' })]);
    expect(plan.throttleMs).toBe(0);
  });
});
