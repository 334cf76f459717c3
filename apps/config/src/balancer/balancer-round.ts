import {
  type BalancerRoundPlan,
  type BalancerRoundSettings,
  type BalancerRoundSnapshot,
  type BalancerRoundState,
  type ChunkRange,
  type ChunkSelectionSettings,
  type CollectionDistribution,
  type CollectionGeneration,
  type MigrationPlan,
  type ShardKey,
  type ShardKeyPattern,
  type ShardStatistics,
  type Value,
  DEFAULT_CHUNK_SELECTION_SETTINGS,
  DEFAULT_DEFRAGMENTATION_SETTINGS,
  TesseraError,
  planBalancerRound,
  planZoneBoundarySplits,
  shardKeyToObject,
  toExtendedJsonObject,
} from '@tessera/core';
import type { BalancerRoundMigration, ClusterSettings } from '@tessera/protocol';
import type { CollectionRow } from '../catalog/catalog-rows.js';
import type { ShardRow } from './balancer-catalog.store.js';

/** What a round reports about one collection it could not balance. */
export type RoundError = { ns?: string; code: string; message: string };

/** A split the main loop issued (at a zone bound, or of a chunk refused as too big), or the chunk it marked jumbo. */
export interface RoundSplit {
  ns: string;
  shard: string;
  min: Record<string, unknown>;
  max: Record<string, unknown>;
  reason: 'zoneBoundary' | 'chunkTooBig';
  outcome: 'split' | 'markedJumbo' | 'left' | 'failed';
  splitPoints?: Array<Record<string, unknown>>;
}

/** One collection of a round's snapshot. */
export interface SnapshotCollection {
  row: CollectionRow;
  distribution: CollectionDistribution;
  pattern: ShardKeyPattern;
  generation: CollectionGeneration;
}

/** A snapshot of the cluster for the policies. */
export interface Snapshot {
  shards: ShardRow[];
  collections: SnapshotCollection[];
  errors: RoundError[];
}

/** A shard key as the shard-key document in Extended JSON that moveRange takes. */
export function wireKey(pattern: ShardKeyPattern, key: ShardKey): Record<string, unknown> {
  return toExtendedJsonObject(shardKeyToObject(pattern, key) as Value) as Record<string, unknown>;
}

export function bounds(range: ChunkRange, pattern: ShardKeyPattern): { min: Record<string, unknown>; max: Record<string, unknown> } {
  return { min: wireKey(pattern, range.min), max: wireKey(pattern, range.max) };
}

/** A migration as the changelog and balancerStatus show it, before its outcome. */
export function describe(plan: MigrationPlan, pattern: ShardKeyPattern): Omit<BalancerRoundMigration, 'outcome'> {
  return { ns: plan.namespace, from: plan.from, to: plan.to, ...bounds(plan.range, pattern), reason: plan.reason };
}

export function errorEntry(ns: string, error: unknown): RoundError {
  if (error instanceof TesseraError) return { ns, code: error.code, message: error.message };
  return { ns, code: 'INTERNAL', message: (error as Error).message };
}

export function statisticsOf(row: ShardRow): ShardStatistics {
  return { id: row.name, state: row.state, zones: row.zones };
}

/**
 * The cluster settings `balancer.policy` and `balancer.maxDonationsPerShard` as the chunk
 * selection policy's mode and donor slots (the `rounds` scheduler keeps MongoDB's one).
 */
export function chunkSelectionSettings(settings: ClusterSettings): ChunkSelectionSettings {
  const { policy, scheduler, maxDonationsPerShard } = settings.balancer;
  return {
    ...DEFAULT_CHUNK_SELECTION_SETTINGS,
    mode: policy === 'chunkCount' ? 'chunkCountThreshold' : 'dataSize',
    maxDonationsPerShard: scheduler === 'rounds' ? 1 : maxDonationsPerShard === 0 ? Infinity : maxDonationsPerShard,
  };
}

/** The round's settings: the cluster's policy, and `TESSERA_BALANCER_MIGRATIONS_THROTTLING_MS`. */
export function roundSettingsOf(settings: ClusterSettings, migrationsThrottlingMs: number): BalancerRoundSettings {
  return { chunkSelection: chunkSelectionSettings(settings), defragmentation: DEFAULT_DEFRAGMENTATION_SETTINGS, migrationsThrottlingMs };
}

/** What the pure round reads of a snapshot: the shards, and each collection's distribution and defragmentation flag. */
export function roundSnapshotOf(snapshot: Snapshot): BalancerRoundSnapshot {
  return {
    shards: snapshot.shards.map(statisticsOf),
    collections: snapshot.collections.map((c) => ({ distribution: c.distribution, defragmenting: c.row.defragment_collection })),
  };
}

/**
 * The planning seam of the config server's round: the same `planZoneBoundarySplits` and
 * `planBalancerRound` the simulator runs, over the snapshot the round service loaded.
 */
export const planRoundSplits = (snapshot: Snapshot) => planZoneBoundarySplits(roundSnapshotOf(snapshot));

export function planRound(
  snapshot: Snapshot,
  state: BalancerRoundState,
  settings: ClusterSettings,
  migrationsThrottlingMs: number,
  nowMs: number,
): BalancerRoundPlan {
  return planBalancerRound(roundSnapshotOf(snapshot), state, roundSettingsOf(settings, migrationsThrottlingMs), nowMs);
}
