/**
 * A chunk: a range of a sharded collection's key space, the shard that owns it, its version
 * and its placement history (reference: "The historical routing table"). Plain data.
 */
import { TesseraError } from '../errors.js';
import type { ChunkRange } from '../ranges/chunk-range.js';
import { chunkRangeToString } from '../ranges/chunk-range.js';
import type { ChunkVersion } from '../versions/chunk-version.js';
import type { ClusterTimestamp } from '../versions/cluster-timestamp.js';
import { clusterTimestampToString, compareClusterTimestamps } from '../versions/cluster-timestamp.js';

/** A shard's name, e.g. `"shard0"`. */
export type ShardId = string;

/** One placement of a chunk: from `validAfter` on, `shard` owned it. */
export interface ChunkHistoryEntry {
  readonly validAfter: ClusterTimestamp;
  readonly shard: ShardId;
}

/** A chunk of a sharded collection. */
export interface Chunk {
  readonly range: ChunkRange;
  readonly shard: ShardId;
  readonly version: ChunkVersion;
  /**
   * Placements, newest first; `history[0].shard` is the current owner. Entries older than the
   * snapshot history window may have been trimmed.
   */
  readonly history: readonly ChunkHistoryEntry[];
  /** Set when the chunk could not be split below the max chunk size. */
  readonly jumbo?: boolean;
}

/**
 * Returns the shard that owned `chunk` at cluster time `atClusterTime`: the newest history
 * entry valid at or before that time.
 * Throws `STALE_CHUNK_HISTORY` when the history does not reach back that far (or is empty).
 */
export function shardAtClusterTime(chunk: Chunk, atClusterTime: ClusterTimestamp): ShardId {
  for (const entry of chunk.history) {
    if (compareClusterTimestamps(entry.validAfter, atClusterTime) <= 0) return entry.shard;
  }
  throw new TesseraError(
    'STALE_CHUNK_HISTORY',
    `Chunk ${chunkRangeToString(chunk.range)} has no placement history at cluster time ${clusterTimestampToString(atClusterTime)}.`,
    { details: { atClusterTime, range: chunkRangeToString(chunk.range), oldest: chunk.history[chunk.history.length - 1]?.validAfter } },
  );
}
