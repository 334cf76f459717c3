/**
 * The simulator's one collection: its chunks with their sizes, the collection version, and the
 * chunk operations a real cluster commits (split, merge, move), applied in memory. Bytes are
 * conserved: a split shares the chunk's bytes among its pieces, a merge sums them.
 */
import { mergeChunks, moveChunk, splitChunk } from '../routing/chunk-operations.js';
import type { ShardId } from '../routing/chunk.js';
import { rangesEqual } from '../ranges/chunk-range.js';
import type { ChunkVersion } from '../versions/chunk-version.js';
import { maxChunkVersion } from '../versions/chunk-version.js';
import type { ClusterTimestamp } from '../versions/cluster-timestamp.js';
import type { ChunkRun } from './chunk-layout.js';
import { layoutChunks } from './chunk-layout.js';
import type { CollectionDistribution, SizedChunk, ZoneRange } from './distribution.js';
import { rangeKey, sortChunks } from './distribution.js';

type Range = SizedChunk['range'];
type Key = Range['min'];

/** A collection's chunks on the simulator's shards, changed by the round's splits, merges and moves. */
export class SimulatedCollection {
  chunks: SizedChunk[];
  private cv: ChunkVersion;
  private tick = 0;

  /** `unsplittable`: the `rangeKey`s of chunks whose documents all share one key value (splitVector finds no point). */
  constructor(
    readonly namespace: string,
    chunks: readonly SizedChunk[],
    private readonly zones: readonly ZoneRange[],
    private readonly maxChunkSizeBytes: number,
    private readonly unsplittable: ReadonlySet<string> = new Set(),
  ) {
    this.chunks = sortChunks(chunks);
    this.cv = this.chunks.reduce((v, c) => maxChunkVersion(v, c.version), (this.chunks[0] as SizedChunk).version);
  }

  /** A collection laid out from a scenario's runs. */
  static fromRuns(
    namespace: string,
    runs: readonly ChunkRun[],
    zones: readonly ZoneRange[],
    maxChunkSizeBytes: number,
  ): SimulatedCollection {
    const chunks = layoutChunks(runs);
    const unsplittable = new Set(runs.flatMap((r, k) => (r.unsplittable === true ? [rangeKey((chunks[k] as SizedChunk).range)] : [])));
    return new SimulatedCollection(namespace, chunks, zones, maxChunkSizeBytes, unsplittable);
  }

  /** The chunk that is exactly `range`. */
  find(range: Range): SizedChunk | undefined {
    return this.chunks.find((c) => rangesEqual(c.range, range));
  }

  /** The bytes of all its chunks. */
  totalBytes(): number {
    return this.chunks.reduce((n, c) => n + (c.estimatedSizeBytes ?? 0), 0);
  }

  /** The distribution the policies read: each shard's bytes are the sum of its chunks'. */
  distribution(): CollectionDistribution {
    const shardDataSizeBytes: Record<ShardId, number> = {};
    for (const c of this.chunks) shardDataSizeBytes[c.shard] = (shardDataSizeBytes[c.shard] ?? 0) + (c.estimatedSizeBytes ?? 0);
    return {
      namespace: this.namespace,
      chunks: this.chunks,
      zones: this.zones,
      maxChunkSizeBytes: this.maxChunkSizeBytes,
      shardDataSizeBytes,
    };
  }

  /** The simulated shard's splitVector: the middle key of the chunk, none for an unsplittable one. */
  splitVector(chunk: SizedChunk): Key[] {
    if (this.unsplittable.has(rangeKey(chunk.range))) return [];
    const lo = chunk.range.min[0];
    const hi = chunk.range.max[0];
    const low = typeof lo === 'number' ? lo : typeof hi === 'number' ? hi - 10 : 0;
    const high = typeof hi === 'number' ? hi : low + 10;
    const middle = Math.floor((low + high) / 2);
    return middle > low && middle < high ? [[middle]] : [];
  }

  /** Commits a split of the chunk `range` at `points`, sharing its bytes among the pieces. */
  split(range: Range, points: readonly Key[]): void {
    const chunk = this.find(range) as SizedChunk;
    const pieces = splitChunk(chunk, points, this.cv);
    // Pieces share the bytes evenly; the last takes the remainder so no byte is lost.
    const total = chunk.estimatedSizeBytes ?? 0;
    const share = Math.floor(total / pieces.length);
    for (const p of pieces) this.cv = maxChunkVersion(this.cv, p.version);
    const sized = pieces.map((p, k) => ({
      ...p,
      estimatedSizeBytes: k === pieces.length - 1 ? total - share * (pieces.length - 1) : share,
    }));
    this.chunks = sortChunks([...this.chunks.filter((c) => c !== chunk), ...sized]);
  }

  /** Commits a merge of the chunks `parts` at `atMs`. */
  merge(parts: readonly Range[], atMs: number): void {
    const merging = this.chunks.filter((c) => parts.some((p) => rangesEqual(p, c.range)));
    const merged: SizedChunk = {
      ...mergeChunks(merging, this.cv, this.clusterTime(atMs)),
      estimatedSizeBytes: merging.reduce((n, c) => n + (c.estimatedSizeBytes ?? 0), 0),
    };
    this.cv = maxChunkVersion(this.cv, merged.version);
    this.chunks = sortChunks([...this.chunks.filter((c) => !merging.includes(c)), merged]);
  }

  /** Marks the chunk `range` jumbo. */
  markJumbo(range: Range): void {
    const index = this.chunks.findIndex((c) => rangesEqual(c.range, range));
    this.chunks[index] = { ...(this.chunks[index] as SizedChunk), jumbo: true };
  }

  /** Commits the move of the chunk `range` to `to` at `atMs`, bumping a control chunk left on the donor. */
  move(range: Range, to: ShardId, atMs: number): void {
    const index = this.chunks.findIndex((c) => rangesEqual(c.range, range));
    const chunk = this.chunks[index] as SizedChunk;
    const control = this.chunks.find((c) => c !== chunk && c.shard === chunk.shard);
    const { moved, control: newControl } = moveChunk(chunk, to, this.cv, this.clusterTime(atMs), control);
    this.chunks[index] = {
      ...moved,
      ...(chunk.estimatedSizeBytes === undefined ? {} : { estimatedSizeBytes: chunk.estimatedSizeBytes }),
    };
    this.cv = maxChunkVersion(this.cv, moved.version);
    if (control && newControl) {
      this.chunks[this.chunks.indexOf(control)] = { ...control, version: newControl.version };
      this.cv = maxChunkVersion(this.cv, newControl.version);
    }
  }

  private clusterTime(atMs: number): ClusterTimestamp {
    this.tick++;
    return { t: Math.floor(atMs / 1000) + 1, i: this.tick };
  }
}
