/**
 * The snapshot the balancer policies read (MongoDB's ClusterStatistics, DistributionStatus and
 * CollectionDataSizeInfoForBalancing) and the plans they return. Plain data: the config server
 * loads it, the policies decide, the balancer executes.
 */
import type { ChunkRange } from '../ranges/chunk-range.js';
import { chunkRangeToString, compareShardKeys, rangeContainsRange } from '../ranges/chunk-range.js';
import type { Chunk, ShardId } from '../routing/chunk.js';

/** `draining` once `removeShard` started; a draining shard gives chunks away and receives none. */
export type ShardState = 'active' | 'draining';

/** One shard as the balancer sees it (ClusterStatistics::ShardStatistics). */
export interface ShardStatistics {
  readonly id: ShardId;
  readonly state: ShardState;
  /** Zones (tags) the shard belongs to. */
  readonly zones: readonly string[];
}

/** A zone key range (`config.tags`): chunks inside `range` belong on shards of `zone`. */
export interface ZoneRange {
  readonly range: ChunkRange;
  readonly zone: string;
}

/** A chunk with the data size the balancer knows for it, when it knows one. */
export interface SizedChunk extends Chunk {
  /** Bytes in the chunk (a `dataSize` result or an estimate); absent when unknown. */
  readonly estimatedSizeBytes?: number;
}

/** One sharded collection's distribution: its chunks, zones and sizes. */
export interface CollectionDistribution {
  readonly namespace: string;
  /** All chunks of the collection, in any order. */
  readonly chunks: readonly SizedChunk[];
  readonly zones: readonly ZoneRange[];
  /** The collection's max chunk size (its `chunkSize` override or the cluster's). */
  readonly maxChunkSizeBytes: number;
  /**
   * Bytes of this collection on each shard (CollectionDataSizeInfoForBalancing). Shards not
   * listed count the sum of their chunks' `estimatedSizeBytes`.
   */
  readonly shardDataSizeBytes?: Readonly<Record<ShardId, number>>;
  /** `configureCollectionBalancing(ns, { enableBalancing: false })` leaves the collection alone. */
  readonly balancingEnabled?: boolean;
  /** Legacy `chunkCountThreshold` mode: the previous round found this collection unbalanced. */
  readonly chunkCountBalancingInProgress?: boolean;
}

/**
 * Why a migration was chosen (the changelog's reason). `topChunk` is a shard's request after it
 * split off the edge chunk of the key space (the top-chunk optimization).
 */
export type MigrationReason = 'drain' | 'zoneViolation' | 'imbalance' | 'defragmentation' | 'topChunk';

/** One migration to issue: move the chunk `range` of `namespace` from `from` to `to`. */
export interface MigrationPlan {
  readonly namespace: string;
  readonly range: ChunkRange;
  readonly from: ShardId;
  readonly to: ShardId;
  readonly reason: MigrationReason;
  /** The chunk's known size, for logging and the simulator. */
  readonly estimatedSizeBytes?: number;
}

/** One split to issue: split the chunk `range` on `shard` at `splitPoints`. */
export interface SplitPlan {
  readonly namespace: string;
  readonly shard: ShardId;
  readonly range: ChunkRange;
  readonly splitPoints: readonly ChunkRange['min'][];
  readonly reason: 'zoneBoundary';
}

/** The name of the pseudo-zone of chunks outside every zone range. */
export const NO_ZONE = '';

/** Returns the chunks sorted by range min. */
export function sortChunks<C extends Chunk>(chunks: readonly C[]): C[] {
  return [...chunks].sort((a, b) => compareShardKeys(a.range.min, b.range.min));
}

/**
 * Returns the zone of a chunk: the zone whose range contains it entirely, or `NO_ZONE`. A
 * chunk straddling a zone boundary is in no zone until it is split there (MongoDB's
 * `getTagForRange`).
 */
export function zoneOfRange(range: ChunkRange, zones: readonly ZoneRange[]): string {
  for (const z of zones) if (rangeContainsRange(z.range, range)) return z.zone;
  return NO_ZONE;
}

/** Returns a stable text key for a range (for maps and sets): its Extended JSON display form. */
export function rangeKey(range: ChunkRange): string {
  return chunkRangeToString(range);
}
