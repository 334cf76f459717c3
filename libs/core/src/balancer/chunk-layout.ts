/**
 * Builds a collection's chunks over one integer field from a compact description, for the
 * simulator's scenarios and the policies' tests: chunk k covers `[k * step, (k + 1) * step)`,
 * the first from MinKey and the last to MaxKey.
 */
import { MaxKey, MinKey } from 'bson';
import type { ShardKey } from '../keys/shard-key-pattern.js';
import type { ShardId } from '../routing/chunk.js';
import type { CollectionGeneration } from '../versions/chunk-version.js';
import type { ClusterTimestamp } from '../versions/cluster-timestamp.js';
import type { SizedChunk } from './distribution.js';

/** One run of consecutive chunks on a shard. */
export interface ChunkRun {
  readonly shard: ShardId;
  /** How many chunks. */
  readonly chunks: number;
  /** Bytes per chunk (omitted: size unknown). */
  readonly sizeBytes?: number;
  readonly jumbo?: boolean;
  /** For the simulator: every document of the chunk has one shard key value, so it cannot split. */
  readonly unsplittable?: boolean;
}

/** The generation the layouts use unless told otherwise. */
export const LAYOUT_GENERATION: CollectionGeneration = Object.freeze({ epoch: '65b000000000000000000001', timestamp: { t: 1, i: 0 } });

/** The integer key at which chunk `k` of a layout starts (chunk 0 starts at MinKey). */
export function layoutKey(k: number, step = 10): ShardKey {
  return [k * step];
}

/**
 * Returns chunks for `runs` in key order, versions 1|0, 1|1, ..., each with one history entry
 * at `createdAt` (so none has been migrated).
 */
export function layoutChunks(
  runs: readonly ChunkRun[],
  options: { step?: number; generation?: CollectionGeneration; createdAt?: ClusterTimestamp } = {},
): SizedChunk[] {
  const step = options.step ?? 10;
  const generation = options.generation ?? LAYOUT_GENERATION;
  const createdAt = options.createdAt ?? { t: 1, i: 0 };
  const total = runs.reduce((n, r) => n + r.chunks, 0);
  const chunks: SizedChunk[] = [];
  let k = 0;
  for (const run of runs) {
    for (let j = 0; j < run.chunks; j++, k++) {
      chunks.push({
        range: { min: k === 0 ? [new MinKey()] : layoutKey(k, step), max: k === total - 1 ? [new MaxKey()] : layoutKey(k + 1, step) },
        shard: run.shard,
        version: { ...generation, major: 1, minor: k },
        history: [{ validAfter: createdAt, shard: run.shard }],
        ...(run.sizeBytes === undefined ? {} : { estimatedSizeBytes: run.sizeBytes }),
        ...(run.jumbo === true ? { jumbo: true } : {}),
      });
    }
  }
  return chunks;
}
