/**
 * The placement operations as pure functions from chunks to the changed chunks they produce,
 * applying the version bump rules (versions/version-bumps.ts) and maintaining history. The
 * config server commits their output; routers and shards feed it to `RoutingTable.applyChanges`.
 */
import { MaxKey, MinKey } from 'bson';
import { TesseraError } from '../errors.js';
import type { ShardKey } from '../keys/shard-key-pattern.js';
import type { ChunkRange } from '../ranges/chunk-range.js';
import { chunkRangeToString, makeChunkRange, mergeRanges, rangesOverlap, splitRange } from '../ranges/chunk-range.js';
import type { Value } from '../values/value.js';
import { typeBracketOf } from '../values/value.js';
import type { CollectionGeneration, CollectionVersion } from '../versions/chunk-version.js';
import { firstChunkVersion, isSameGeneration, makeChunkVersion } from '../versions/chunk-version.js';
import type { ClusterTimestamp } from '../versions/cluster-timestamp.js';
import { bumpVersionOnMerge, bumpVersionsOnMove, bumpVersionsOnRefine, bumpVersionsOnSplit } from '../versions/version-bumps.js';
import type { Chunk, ChunkHistoryEntry, ShardId } from './chunk.js';

/** Input of `createInitialChunks`. */
export interface InitialChunksSpec {
  readonly generation: CollectionGeneration;
  /** The whole key space, usually `[globalMinKey(pattern), globalMaxKey(pattern))`. */
  readonly keySpace: ChunkRange;
  /** Optional pre-split points (e.g. for a hashed key), strictly increasing. */
  readonly splitPoints?: readonly ShardKey[];
  /** Shards that receive the chunks round-robin, in order; at least one. */
  readonly shards: readonly ShardId[];
  /** Cluster time of creation: the first history entry of every chunk. */
  readonly at: ClusterTimestamp;
}

/**
 * Creates the chunks of a newly sharded collection: one chunk 1|0 (the convention for the
 * first chunk) or, with split points, chunks 1|0, 1|1, ... placed round-robin on `shards`.
 * Throws `BAD_VALUE` on an empty shard list or invalid split points.
 */
export function createInitialChunks(spec: InitialChunksSpec): Chunk[] {
  if (spec.shards.length === 0) throw new TesseraError('BAD_VALUE', 'Sharding a collection needs at least one shard.');
  const ranges =
    spec.splitPoints && spec.splitPoints.length > 0
      ? splitRange(spec.keySpace, spec.splitPoints)
      : [makeChunkRange(spec.keySpace.min, spec.keySpace.max)];
  const first = firstChunkVersion(spec.generation);
  return ranges.map((range, k) => {
    const shard = spec.shards[k % spec.shards.length] as ShardId;
    return {
      range,
      shard,
      version: makeChunkVersion(spec.generation, first.major, first.minor + k),
      history: [{ validAfter: spec.at, shard }],
    };
  });
}

/**
 * Splits `chunk` at `splitPoints` (table row "Splitting a chunk C into n pieces"): piece k gets
 * <Mcv, mcv + k>; every piece keeps the chunk's shard and history. Returns the pieces in key order.
 * Throws `BAD_VALUE` on invalid split points, `STALE_EPOCH` when `cv` is of another generation.
 */
export function splitChunk(chunk: Chunk, splitPoints: readonly ShardKey[], cv: CollectionVersion): Chunk[] {
  checkGeneration(chunk, cv);
  const ranges = splitRange(chunk.range, splitPoints);
  const versions = bumpVersionsOnSplit(cv, ranges.length);
  return ranges.map((range, k) => ({ ...chunk, range, version: versions[k] as CollectionVersion }));
}

/**
 * Merges contiguous chunks of one shard, in key order (row "Merging chunks C1, ..., Cn"): the
 * result gets <Mcv, mcv + 1> and a fresh history `[{validAfter: at, shard}]`, as MongoDB does.
 * Throws `BAD_VALUE` for fewer than 2 chunks, a gap, or chunks on different shards;
 * `STALE_EPOCH` when a chunk or `cv` is of another generation.
 */
export function mergeChunks(chunks: readonly Chunk[], cv: CollectionVersion, at: ClusterTimestamp): Chunk {
  const first = chunks[0];
  if (first === undefined || chunks.length < 2) throw new TesseraError('BAD_VALUE', 'A merge needs at least two chunks.');
  for (const c of chunks) {
    checkGeneration(c, cv);
    if (c.shard !== first.shard) {
      throw new TesseraError('BAD_VALUE', `Cannot merge chunks on different shards (${first.shard} and ${c.shard}).`, {
        details: { shards: [first.shard, c.shard] },
      });
    }
  }
  const range = mergeRanges(chunks.map((c) => c.range));
  return { range, shard: first.shard, version: bumpVersionOnMerge(cv, chunks.length), history: [{ validAfter: at, shard: first.shard }] };
}

/** The chunks a migration changes: the moved chunk, and the donor's control chunk if it has one. */
export interface MoveResult {
  readonly moved: Chunk;
  readonly control: Chunk | undefined;
}

/**
 * Moves `chunk` to `toShard` at cluster time `at` (row "Moving a chunk C"): it gets
 * <Mcv + 1, 0> and a history entry for the recipient; `controlChunk`, another chunk the donor
 * keeps, gets <Mcv + 1, 1> so the donor's shard version advances too.
 * Throws `BAD_VALUE` when the recipient is the donor or the control chunk is not a different
 * chunk on the donor; `STALE_EPOCH` on a generation mismatch.
 */
export function moveChunk(chunk: Chunk, toShard: ShardId, cv: CollectionVersion, at: ClusterTimestamp, controlChunk?: Chunk): MoveResult {
  checkGeneration(chunk, cv);
  if (toShard === chunk.shard)
    throw new TesseraError('BAD_VALUE', `Chunk ${chunkRangeToString(chunk.range)} is already on ${toShard}.`, {
      details: { shard: toShard },
    });
  if (controlChunk !== undefined) {
    checkGeneration(controlChunk, cv);
    if (controlChunk.shard !== chunk.shard || rangesOverlap(controlChunk.range, chunk.range)) {
      throw new TesseraError('BAD_VALUE', 'The control chunk must be another chunk on the donor shard.', {
        details: { shard: controlChunk.shard },
      });
    }
  }
  const versions = bumpVersionsOnMove(cv, controlChunk !== undefined);
  const moved: Chunk = {
    ...chunk,
    shard: toShard,
    version: versions.moved,
    history: [{ validAfter: at, shard: toShard }, ...chunk.history],
  };
  const control = controlChunk && versions.control ? { ...controlChunk, version: versions.control } : undefined;
  return { moved, control };
}

/**
 * A moved chunk's history without the owners no read can ask for any more: MongoDB's
 * commitChunkMigration keeps `windowSecs` of history, the largest of
 * minSnapshotHistoryWindowInSeconds, transactionLifetimeLimitSeconds and 10 s. An entry goes
 * once its successor took over more than `windowSecs` before `at`: a read at any time in the
 * window still finds its owner (MongoDB drops by the entry's own start, which can lose the
 * owner of the window's first seconds). The newest entry always stays.
 */
export function trimChunkHistory(
  history: readonly ChunkHistoryEntry[],
  at: ClusterTimestamp,
  windowSecs: number,
): readonly ChunkHistoryEntry[] {
  let keep = history.length;
  while (keep > 1 && history[keep - 2]!.validAfter.t + windowSecs < at.t) keep--;
  return keep === history.length ? history : history.slice(0, keep);
}

/** MongoDB's history window for chunk history: the largest of the snapshot window, the transaction lifetime and 10 s. */
export function chunkHistoryWindowSecs(minSnapshotHistoryWindowSecs: number, transactionLifetimeLimitSecs: number): number {
  return Math.max(minSnapshotHistoryWindowSecs, transactionLifetimeLimitSecs, 10);
}

/**
 * Refines the shard key (row "Refining a collection's shard key"): every chunk keeps Mi|mi and
 * takes the new generation; each bound is extended by `addedFields` values, MaxKey when the
 * bound's last value is MaxKey and MinKey otherwise, as MongoDB extends bounds.
 * Returns the new chunks in input order. Throws `BAD_VALUE` when the epoch does not change or
 * `addedFields` is not a positive integer.
 */
export function refineChunks(chunks: readonly Chunk[], newGeneration: CollectionGeneration, addedFields: number): Chunk[] {
  if (!Number.isSafeInteger(addedFields) || addedFields < 1) throw new TesseraError('BAD_VALUE', 'Refining adds at least one field.');
  const versions = bumpVersionsOnRefine(
    chunks.map((c) => c.version),
    newGeneration,
  );
  const extend = (bound: ShardKey): ShardKey => {
    const last = bound[bound.length - 1] as Value;
    const isMax = typeBracketOf(last) === 'maxKey';
    return [...bound, ...Array.from({ length: addedFields }, (): Value => (isMax ? new MaxKey() : new MinKey()))];
  };
  return chunks.map((c, i) => ({
    ...c,
    range: { min: extend(c.range.min), max: extend(c.range.max) },
    version: versions[i] as CollectionVersion,
  }));
}

function checkGeneration(chunk: Chunk, cv: CollectionGeneration): void {
  if (!isSameGeneration(chunk.version, cv)) {
    throw new TesseraError('STALE_EPOCH', `Chunk ${chunkRangeToString(chunk.range)} belongs to another generation of the collection.`, {
      details: { chunkEpoch: chunk.version.epoch, collectionEpoch: cv.epoch },
    });
  }
}
