/**
 * Router targeting (reference "Query Isolation"): the shards that own the key ranges a filter
 * can match. Shard-key equality (or a hashed key's value) gives one shard, a range on the key's
 * prefix the overlapping shards, anything else every shard that owns a chunk.
 */
import type { ChunkRange, ClusterTimestamp, RoutingTable, ShardId, ShardKeyPattern } from '@tessera/core';
import { compareShardKeys } from '@tessera/core';
import { isFullKeySpace, keyRangesForFilter } from './key-ranges.js';

/** Which shards a filter must be sent to, and why. */
export interface ShardTargets {
  /** Sorted shard ids; empty when no document can match. */
  readonly shards: ShardId[];
  /** The key ranges that can hold matching documents (see `keyRangesForFilter`). */
  readonly ranges: ChunkRange[];
  /** True when the filter does not constrain the key's prefix (a scatter-gather). */
  readonly broadcast: boolean;
}

/**
 * Returns the shards owning keys in `ranges`. A range whose max has one value more than the
 * pattern (`[...k, MinKey]`, "up to and including k") is looked up as `[min, k)` plus the chunk
 * holding `k`, since `RoutingTable` takes keys of the pattern's arity; a longer min is cut to
 * the pattern's arity, which can only add a neighbouring chunk, never lose one.
 * Throws as `RoutingTable.shardsForRange` and `shardFor` (`STALE_CHUNK_HISTORY` with `atClusterTime`).
 */
export function shardsForKeyRanges(
  table: RoutingTable,
  pattern: ShardKeyPattern,
  ranges: readonly ChunkRange[],
  atClusterTime?: ClusterTimestamp,
): ShardId[] {
  const n = pattern.fields.length;
  const shards = new Set<ShardId>();
  for (const range of ranges) {
    const min = range.min.slice(0, n);
    const max = range.max.slice(0, n);
    if (compareShardKeys(min, max) < 0) for (const shard of table.shardsForRange({ min, max }, atClusterTime)) shards.add(shard);
    if (range.max.length > n) shards.add(table.shardFor(max, atClusterTime));
  }
  return [...shards].sort();
}

/**
 * Returns the shards a filter targets on `table`.
 * Throws `BAD_VALUE` as `parseFilter` for an invalid filter, and as `shardsForKeyRanges`.
 */
export function targetShards(
  table: RoutingTable,
  pattern: ShardKeyPattern,
  filter: unknown,
  atClusterTime?: ClusterTimestamp,
): ShardTargets {
  const ranges = keyRangesForFilter(pattern, filter);
  return { shards: shardsForKeyRanges(table, pattern, ranges, atClusterTime), ranges, broadcast: isFullKeySpace(pattern, ranges) };
}
