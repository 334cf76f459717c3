import {
  type ChunkRange,
  type CollectionDistribution,
  type CollectionGeneration,
  type MigrationPlan,
  type ShardKey,
  type ShardKeyPattern,
  type Value,
  TesseraError,
  shardKeyToObject,
  toExtendedJsonObject,
} from '@tessera/core';
import type { BalancerRoundMigration } from '@tessera/protocol';
import type { CollectionRow } from '../catalog/catalog-rows.js';
import type { ShardRow } from './cluster-statistics.service.js';

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
