/**
 * The config server's round and the simulator's run the same planner: one recorded snapshot of
 * the catalog, loaded the way the round service loads it (ClusterStatisticsService over the
 * catalog store and the shards' statsForBalancing) and planned through the service's seam, gives
 * the same actions as the simulator's first round from the same chunks.
 */
import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import { describe, expect, it } from 'vitest';
import { type ShardStatistics, type SizedChunk, type ZoneRange, decodeKey, simulateFirstRound } from '@tessera/core';
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

function zonesOf(ns: string): ZoneRange[] {
  return recorded.tags
    .filter((t) => t.ns === ns)
    .map((t) => ({ range: { min: decodeKey(Buffer.from(t.min, 'hex')), max: decodeKey(Buffer.from(t.max, 'hex')) }, zone: t.tag }));
}

/** The catalog store and the shards' statsForBalancing, answering from the recording. */
function recordedStatistics(): ClusterStatisticsService {
  const catalog: Pick<BalancerCatalogStore, 'shards' | 'balancedCollections' | 'chunks' | 'zones'> = {
    shards: async () => recorded.shards,
    balancedCollections: async () => recorded.collections.filter((c) => c.balancing_enabled || c.defragment_collection),
    chunks: async (collection) => chunksOf(collection),
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
  return new ClusterStatisticsService(catalog as BalancerCatalogStore, clients as unknown as InternalClients, logger);
}

const NO_ROUNDS_YET = {
  defragmentation: new Map(),
  chunkCountInProgress: new Set<string>(),
  busyShards: new Set<string>(),
  lastMigrationEndMs: null,
};

describe('a recorded cluster snapshot planned by the config server and by the simulator', () => {
  it.each([
    { policy: 'dataSize', mode: 'dataSize' },
    { policy: 'chunkCount', mode: 'chunkCountThreshold' },
  ] as const)('gives the same splits, migrations and statuses under the $policy policy', async ({ policy, mode }) => {
    const settings: ClusterSettings = {
      ...DEFAULT_CLUSTER_SETTINGS,
      balancer: { ...DEFAULT_CLUSTER_SETTINGS.balancer, policy },
      chunkSizeBytes: recorded.clusterSettings.chunkSizeBytes,
    };
    const snapshot = await recordedStatistics().roundSnapshot(settings);
    const service = { splits: planRoundSplits(snapshot), plan: planRound(snapshot, NO_ROUNDS_YET, settings, 1000, 0) };

    const shards: ShardStatistics[] = recorded.shards.map((s) => ({ id: s.name, state: s.state, zones: s.zones }));
    const collection = { namespace: row.ns, chunks: chunksOf(row), zones: zonesOf(row.ns), maxChunkSizeBytes: settings.chunkSizeBytes };
    const simulated = simulateFirstRound({ shards, collection, mode });

    expect(snapshot.errors).toEqual([]);
    expect(service.plan.migrations.length).toBeGreaterThan(0);
    expect(simulated.splits).toEqual(service.splits);
    expect(simulated.migrations).toEqual(service.plan.migrations);
    expect(simulated.statuses).toEqual(service.plan.statuses);
  });

  it('is a round with work of every kind: a drain onto a new shard, a zone violation, and an imbalance', async () => {
    const settings = { ...DEFAULT_CLUSTER_SETTINGS, chunkSizeBytes: recorded.clusterSettings.chunkSizeBytes };
    const plan = planRound(await recordedStatistics().roundSnapshot(settings), NO_ROUNDS_YET, settings, 1000, 0);
    expect(plan.migrations.map((m) => [m.reason, m.from, m.to])).toEqual([
      ['drain', 'shard3', 'shard4'],
      ['zoneViolation', 'shard2', 'shard0'],
      ['imbalance', 'shard1', 'shard5'],
    ]);
    expect(plan.statuses).toEqual([expect.objectContaining({ namespace: row.ns, firstComplianceViolation: 'draining' })]);
    expect(plan.throttleMs).toBe(0);
  });
});
