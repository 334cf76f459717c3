/**
 * The routing table of one sharded collection (MongoDB's ChunkManager / RoutingTableHistory):
 * an immutable, sorted, gap-free set of chunks with per-shard versions, built once from the
 * full chunk list and then updated incrementally from the chunks that changed.
 *
 * Structure: a `BlockList` keyed by each chunk's encoded min (binary string). Coverage is an
 * invariant, so a chunk's max is the next chunk's min and lookups need only the mins:
 * `chunkFor` is two binary searches, O(log N). Per-shard chunk counts and shard versions are
 * kept in a small map updated in O(changes). `applyChanges` costs O(changes · log N + B ·
 * touched blocks + N / B), not O(N).
 */
import { TesseraError } from '../errors.js';
import { encodeKeyToBinaryString, encodeKeyTransient } from '../keys/key-encoding.js';
import type { ShardKey } from '../keys/shard-key-pattern.js';
import type { ChunkRange } from '../ranges/chunk-range.js';
import { chunkRangeToString } from '../ranges/chunk-range.js';
import type { ChunkVersion, CollectionGeneration, CollectionVersion, ShardVersion } from '../versions/chunk-version.js';
import { chunkVersionToString, compareChunkVersions, generationOf, isSameGeneration, zeroVersionOf } from '../versions/chunk-version.js';
import type { ClusterTimestamp } from '../versions/cluster-timestamp.js';
import { BlockList, DEFAULT_BLOCK_SIZE } from './block-list.js';
import type { BlockEdit } from './block-list.js';
import type { KeyProbe } from './key-probe.js';
import { compareKeyToProbe, probeFromBytes, probeFromString } from './key-probe.js';
import type { Chunk, ShardId } from './chunk.js';
import { shardAtClusterTime } from './chunk.js';

/** Options of `RoutingTable.fromChunks`. */
export interface RoutingTableOptions {
  /** Entries per block of the underlying block list (tests use small blocks). */
  readonly blockSize?: number;
}

interface ShardStats {
  readonly count: number;
  readonly version: ShardVersion;
}

const MIN_KEY_BYTE = '\u0001';
const MAX_KEY_BYTE = '\u007f';

/** An immutable routing table of one collection generation. */
export class RoutingTable {
  private constructor(
    private readonly list: BlockList<Chunk>,
    private readonly stats: ReadonlyMap<ShardId, ShardStats>,
    /** The generation all chunks belong to. */
    readonly generation: CollectionGeneration,
    /** The highest chunk version: the collection version. */
    readonly collectionVersion: CollectionVersion,
    /** Number of fields in the shard key. */
    readonly keyArity: number,
    private readonly maxKey: string,
  ) {}

  /**
   * Builds a table from the full chunk list of one collection generation (a full refresh), in
   * any order. O(N log N) when unsorted, O(N) when sorted.
   * Throws `BAD_VALUE` when the list is empty or a chunk's bounds have the wrong arity or are
   * not ordered; `STALE_EPOCH` when chunks mix generations; `CONFLICTING_OPERATION` (details
   * `problem`: `'gap' | 'overlap' | 'start' | 'end'`) when they do not cover the key space
   * from all-MinKey to all-MaxKey exactly.
   */
  static fromChunks(chunks: readonly Chunk[], options: RoutingTableOptions = {}): RoutingTable {
    const first = chunks[0];
    if (first === undefined) throw new TesseraError('BAD_VALUE', 'A routing table needs at least one chunk.');
    const generation = generationOf(first.version);
    const arity = first.range.min.length;
    let entries = chunks.map((chunk) => encodeChunk(chunk, generation, arity));
    if (!isSortedByMin(entries)) entries = [...entries].sort((a, b) => (a.min < b.min ? -1 : a.min > b.min ? 1 : 0));
    const keySpaceMin = MIN_KEY_BYTE.repeat(arity);
    const keySpaceMax = MAX_KEY_BYTE.repeat(arity);
    if ((entries[0] as EncodedChunk).min !== keySpaceMin)
      throw coverage('start', 'The chunks do not start at MinKey.', (entries[0] as EncodedChunk).chunk);
    for (let i = 1; i < entries.length; i++) {
      const previous = entries[i - 1] as EncodedChunk;
      const current = entries[i] as EncodedChunk;
      if (previous.max !== current.min) {
        throw coverage(
          previous.max < current.min ? 'gap' : 'overlap',
          `Chunks ${chunkRangeToString(previous.chunk.range)} and ${chunkRangeToString(current.chunk.range)} do not meet.`,
          current.chunk,
        );
      }
    }
    const last = entries[entries.length - 1] as EncodedChunk;
    if (last.max !== keySpaceMax) throw coverage('end', 'The chunks do not end at MaxKey.', last.chunk);
    const stats = new Map<ShardId, ShardStats>();
    let collectionVersion: ChunkVersion = zeroVersionOf(generation);
    for (const { chunk } of entries) {
      const s = stats.get(chunk.shard);
      stats.set(chunk.shard, { count: (s?.count ?? 0) + 1, version: newer(s?.version, chunk.version) });
      collectionVersion = newer(collectionVersion, chunk.version);
    }
    const list = BlockList.fromSorted(
      entries.map((e) => e.min),
      entries.map((e) => e.chunk),
      options.blockSize ?? DEFAULT_BLOCK_SIZE,
    );
    return new RoutingTable(list, stats, generation, collectionVersion, arity, keySpaceMax);
  }

  /** Returns the number of chunks. O(1). Throws nothing. */
  get size(): number {
    return this.list.size;
  }

  /**
   * Returns the chunk containing `key` (values in pattern order, or already-encoded bytes).
   * With `atClusterTime`, returns that chunk with `shard` set to the shard that owned the key
   * at that time (a snapshot read's target). O(log N).
   * Throws `BAD_VALUE` when the key has the wrong number of fields; `SHARD_KEY_NOT_FOUND` when
   * no chunk contains it (an all-MaxKey key); `STALE_CHUNK_HISTORY` when the chunk's history
   * does not reach back to `atClusterTime`.
   */
  chunkFor(key: ShardKey | Uint8Array, atClusterTime?: ClusterTimestamp): Chunk {
    const probe = this.probeFor(key);
    const chunk = compareKeyToProbe(this.maxKey, probe) > 0 ? this.list.floorItem(probe) : undefined;
    if (chunk === undefined) {
      throw new TesseraError('SHARD_KEY_NOT_FOUND', 'No chunk contains the given shard key.', {
        details: { collectionVersion: this.collectionVersion },
      });
    }
    if (atClusterTime === undefined) return chunk;
    const shard = shardAtClusterTime(chunk, atClusterTime);
    return shard === chunk.shard ? chunk : { ...chunk, shard };
  }

  /** Returns the shard that owns `key` (at `atClusterTime` if given). Throws as `chunkFor`. */
  shardFor(key: ShardKey | Uint8Array, atClusterTime?: ClusterTimestamp): ShardId {
    return this.chunkFor(key, atClusterTime).shard;
  }

  /**
   * Returns the chunks that share at least one key with `range`, in key order.
   * O(log N + result). Throws `BAD_VALUE` when the bounds have the wrong number of fields.
   */
  chunksOverlapping(range: ChunkRange): Chunk[] {
    this.checkArity(range.min);
    this.checkArity(range.max);
    const min = encodeKeyToBinaryString(range.min);
    const max = encodeKeyToBinaryString(range.max);
    const result: Chunk[] = [];
    if (min >= max) return result;
    for (const [key, chunk] of this.list.entries(Math.max(0, this.list.floorPosition(probeFromString(min))))) {
      if (key >= max) break;
      result.push(chunk);
    }
    return result;
  }

  /**
   * Returns the shards that own keys of `range` (at `atClusterTime` if given), sorted.
   * Throws as `chunksOverlapping`, and `STALE_CHUNK_HISTORY` as `chunkFor`.
   */
  shardsForRange(range: ChunkRange, atClusterTime?: ClusterTimestamp): ShardId[] {
    const shards = new Set<ShardId>();
    for (const chunk of this.chunksOverlapping(range)) shards.add(atClusterTime ? shardAtClusterTime(chunk, atClusterTime) : chunk.shard);
    return [...shards].sort();
  }

  /** Returns every chunk in key order. O(N). Throws nothing. */
  chunks(): Chunk[] {
    return [...this.list.items()];
  }

  /** Returns the chunks owned by `shard` in key order. O(N). Throws nothing. */
  chunksOnShard(shard: ShardId): Chunk[] {
    const result: Chunk[] = [];
    for (const chunk of this.list.items()) if (chunk.shard === shard) result.push(chunk);
    return result;
  }

  /** Returns the shards owning at least one chunk, sorted. O(shards). Throws nothing. */
  shardIds(): ShardId[] {
    return [...this.stats]
      .filter(([, s]) => s.count > 0)
      .map(([id]) => id)
      .sort();
  }

  /** Returns how many chunks `shard` owns. O(1). Throws nothing. */
  chunkCountOnShard(shard: ShardId): number {
    return this.stats.get(shard)?.count ?? 0;
  }

  /**
   * Returns the shard version of `shard`: its highest chunk version, or 0|0 of this generation
   * when it owns no chunk. O(1). Throws nothing.
   */
  shardVersion(shard: ShardId): ShardVersion {
    const s = this.stats.get(shard);
    return s && s.count > 0 ? s.version : zeroVersionOf(this.generation);
  }

  /** Returns every shard version, for shards owning chunks. Throws nothing. */
  shardVersions(): Map<ShardId, ShardVersion> {
    return new Map(this.shardIds().map((id) => [id, this.shardVersion(id)]));
  }

  /**
   * Returns a new table with `changed` chunks applied (an incremental refresh): each changed
   * chunk replaces the chunks it covers. Cost is proportional to the changes, not to the table.
   * Throws `STALE_EPOCH` when a changed chunk is of another generation, and
   * `CONFLICTING_OPERATION` (details `problem`) when changed chunks overlap each other or do not
   * exactly replace whole existing chunks (the result would have a gap or overlap); in both
   * cases the caller must do a full refresh. Throws `BAD_VALUE` for malformed chunks.
   */
  applyChanges(changed: readonly Chunk[]): RoutingTable {
    if (changed.length === 0) return this;
    const entries = changed
      .map((chunk) => encodeChunk(chunk, this.generation, this.keyArity))
      .sort((a, b) => (a.min < b.min ? -1 : a.min > b.min ? 1 : 0));
    const edits: BlockEdit<Chunk>[] = [];
    for (let i = 0; i < entries.length;) {
      const runStart = i;
      while (i + 1 < entries.length && (entries[i] as EncodedChunk).max === (entries[i + 1] as EncodedChunk).min) i++;
      const first = entries[runStart] as EncodedChunk;
      const last = entries[i] as EncodedChunk;
      const next = entries[i + 1];
      if (next !== undefined && last.max > next.min)
        throw coverage(
          'overlap',
          `Changed chunks ${chunkRangeToString(last.chunk.range)} and ${chunkRangeToString(next.chunk.range)} overlap.`,
          next.chunk,
        );
      i++;
      const start = this.list.exactPosition(probeFromString(first.min));
      if (start < 0)
        throw coverage('gap', `Changed chunk ${chunkRangeToString(first.chunk.range)} starts inside an existing chunk.`, first.chunk);
      const end = last.max === this.maxKey ? this.list.size : this.list.exactPosition(probeFromString(last.max));
      if (end < 0)
        throw coverage('gap', `Changed chunk ${chunkRangeToString(last.chunk.range)} ends inside an existing chunk.`, last.chunk);
      const run = entries.slice(runStart, i);
      edits.push({ start, end, keys: run.map((e) => e.min), items: run.map((e) => e.chunk) });
    }
    const stats = this.updatedStats(edits);
    let collectionVersion = this.collectionVersion;
    for (const s of stats.values()) if (s.count > 0) collectionVersion = newer(collectionVersion, s.version);
    return new RoutingTable(this.list.replace(edits), stats, this.generation, collectionVersion, this.keyArity, this.maxKey);
  }

  /**
   * Per-shard counts and versions after the edits. A shard whose highest chunk was replaced is
   * rescanned (O(N)) only when no added chunk on it is at least as new, which valid operations
   * never cause: a move bumps the donor's control chunk, a split or merge adds newer chunks, and
   * an incremental refresh re-sends the top chunk itself.
   */
  private updatedStats(edits: readonly BlockEdit<Chunk>[]): Map<ShardId, ShardStats> {
    const stats = new Map(this.stats);
    const lostTop = new Map<ShardId, ShardVersion>();
    for (const edit of edits) {
      for (const removed of this.list.items(edit.start, edit.end)) {
        const s = stats.get(removed.shard) as ShardStats;
        if (compareChunkVersions(removed.version, s.version) === 'same' && !lostTop.has(removed.shard))
          lostTop.set(removed.shard, s.version);
        stats.set(removed.shard, { count: s.count - 1, version: s.version });
      }
    }
    const restored = new Set<ShardId>();
    for (const edit of edits) {
      for (const added of edit.items) {
        const s = stats.get(added.shard);
        stats.set(added.shard, { count: (s?.count ?? 0) + 1, version: newer(s?.version, added.version) });
        const top = lostTop.get(added.shard);
        if (top !== undefined && compareChunkVersions(added.version, top) !== 'older') restored.add(added.shard);
      }
    }
    for (const shard of lostTop.keys()) {
      const s = stats.get(shard) as ShardStats;
      if (s.count === 0) stats.set(shard, { count: 0, version: zeroVersionOf(this.generation) });
      else if (!restored.has(shard)) stats.set(shard, { count: s.count, version: this.rescanShardVersion(shard, edits) });
    }
    return stats;
  }

  private rescanShardVersion(shard: ShardId, edits: readonly BlockEdit<Chunk>[]): ShardVersion {
    let version: ShardVersion = zeroVersionOf(this.generation);
    let position = 0;
    for (const edit of edits) {
      for (const chunk of this.list.items(position, edit.start)) if (chunk.shard === shard) version = newer(version, chunk.version);
      for (const chunk of edit.items) if (chunk.shard === shard) version = newer(version, chunk.version);
      position = edit.end;
    }
    for (const chunk of this.list.items(position)) if (chunk.shard === shard) version = newer(version, chunk.version);
    return version;
  }

  private probeFor(key: ShardKey | Uint8Array): KeyProbe {
    if (key instanceof Uint8Array) return probeFromBytes(key);
    this.checkArity(key);
    const encoded = encodeKeyTransient(key);
    return probeFromBytes(encoded.bytes, encoded.length);
  }

  private checkArity(key: ShardKey): void {
    if (key.length !== this.keyArity) {
      throw new TesseraError('BAD_VALUE', `A shard key of this collection has ${this.keyArity} fields, got ${key.length}.`, {
        details: { expected: this.keyArity, actual: key.length },
      });
    }
  }
}

interface EncodedChunk {
  readonly chunk: Chunk;
  readonly min: string;
  readonly max: string;
}

function encodeChunk(chunk: Chunk, generation: CollectionGeneration, arity: number): EncodedChunk {
  if (!isSameGeneration(chunk.version, generation)) {
    throw new TesseraError(
      'STALE_EPOCH',
      `Chunk ${chunkRangeToString(chunk.range)} has version ${chunkVersionToString(chunk.version)} of another collection generation.`,
      {
        details: { expected: generation, received: generationOf(chunk.version) },
      },
    );
  }
  if (chunk.range.min.length !== arity || chunk.range.max.length !== arity) {
    throw new TesseraError('BAD_VALUE', `Chunk ${chunkRangeToString(chunk.range)} does not have ${arity} key fields.`, {
      details: { expected: arity },
    });
  }
  const min = encodeKeyToBinaryString(chunk.range.min);
  const max = encodeKeyToBinaryString(chunk.range.max);
  if (min >= max) throw new TesseraError('BAD_VALUE', `Chunk ${chunkRangeToString(chunk.range)} is empty or inverted.`);
  return { chunk, min, max };
}

function isSortedByMin(entries: readonly EncodedChunk[]): boolean {
  for (let i = 1; i < entries.length; i++) if ((entries[i - 1] as EncodedChunk).min > (entries[i] as EncodedChunk).min) return false;
  return true;
}

function newer(a: ChunkVersion | undefined, b: ChunkVersion): ChunkVersion {
  return a === undefined || compareChunkVersions(b, a) === 'newer' ? b : a;
}

function coverage(problem: 'gap' | 'overlap' | 'start' | 'end', message: string, chunk: Chunk): TesseraError {
  return new TesseraError('CONFLICTING_OPERATION', `${message} The routing table needs a full refresh.`, {
    details: { problem, range: chunkRangeToString(chunk.range) },
  });
}
