/**
 * Jumbo handling of the balancer's main thread (balancer-internals.md "Jumbo chunks"): a
 * migration of a chunk larger than twice the max chunk size is refused as too big; the balancer
 * then tries to split the chunk, and marks it jumbo when no split point exists (too many
 * documents share one shard key value). Jumbo chunks are not selected again until
 * `clearJumboFlag`, or moved with `forceJumbo`.
 */
import type { ShardKey } from '../keys/shard-key-pattern.js';

/** True when a donor refuses to move a chunk of `sizeBytes`: more than twice the max chunk size. */
export function isTooBigToMove(sizeBytes: number, maxChunkSizeBytes: number): boolean {
  return sizeBytes > 2 * maxChunkSizeBytes;
}

/** What to do with a chunk whose migration was refused as too big. */
export type ChunkTooBigDecision =
  { readonly action: 'split'; readonly splitPoints: readonly ShardKey[] } | { readonly action: 'markJumbo' };

/** Given the split points `splitVector` found for the chunk, split there, or mark it jumbo when there are none. */
export function decideOnChunkTooBig(splitPoints: readonly ShardKey[]): ChunkTooBigDecision {
  return splitPoints.length > 0 ? { action: 'split', splitPoints } : { action: 'markJumbo' };
}

/**
 * Given the donor's `splitVector` answer for a chunk refused as too big: none of its keys and not
 * `unsplittable` means the chunk is under the max after all (the donor's estimate was above), so
 * it is left as it is; else as `decideOnChunkTooBig`.
 */
export function decideOnSplitVector(
  splitPoints: readonly ShardKey[],
  unsplittable: boolean,
): ChunkTooBigDecision | { readonly action: 'leave' } {
  if (!unsplittable && splitPoints.length === 0) return { action: 'leave' };
  return decideOnChunkTooBig(splitPoints);
}
