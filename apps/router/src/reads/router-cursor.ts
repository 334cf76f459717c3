/**
 * A router cursor (mongos's ClusterClientCursor): the shard cursors of one query and the
 * merge state. With a sort, each shard returns its documents sorted and the router
 * merge-sorts them (reference "Sorting"): it emits the smallest head among the shards, so it
 * must hold at least one document of every shard not yet exhausted, fetching more with
 * getMore as a shard's buffer empties. Without a sort it drains the shards one after another.
 * Skip and limit apply after the merge (each shard was asked for `skip + limit` documents
 * from its start, as the router cannot know where the first `skip` come from). A batch ends,
 * as the shards' do, before the document that would take it past `maxBatchBytes` (16 MiB of
 * BSON by default), and always holds one document when any is left.
 *
 * Pure apart from the `ShardCursorPort`; not safe for concurrent `nextBatch` calls (the
 * cursor registry serialises them).
 */
import type { ValueObject } from '@tessera/core';
import { type DocumentComparator, MAX_BATCH_BYTES, type Projector, bsonSize } from '@tessera/query';

/** One shard's answer: documents and the shard cursor to read more from (null when exhausted). */
export interface ShardBatch {
  readonly cursorId: string | null;
  readonly documents: readonly ValueObject[];
}

/** How a router cursor reaches the shards' cursors. */
export interface ShardCursorPort {
  getMore(shard: string, cursorId: string, batchSize: number): Promise<ShardBatch>;
  kill(shard: string, cursorIds: string[]): Promise<void>;
}

export interface RouterCursorOptions {
  /** Merge order; without it the shards are read one after another. */
  readonly compare?: DocumentComparator;
  /** Documents to drop after the merge. */
  readonly skip?: number;
  /** Documents to return at most in all; 0 or undefined for no limit. */
  readonly limit?: number;
  /** Applied to each document returned, when the shards were asked for whole documents. */
  readonly project?: Projector;
  /** The most a batch of more than one document holds, in BSON bytes. Default 16 MiB. */
  readonly maxBatchBytes?: number;
}

interface ShardStream {
  readonly shard: string;
  cursorId: string | null;
  buffer: readonly ValueObject[];
  position: number;
}

export class RouterCursor {
  private readonly streams: ShardStream[];
  private skipLeft: number;
  private limitLeft: number;
  private closed = false;

  constructor(
    readonly ns: string,
    firstBatches: ReadonlyArray<{ shard: string; batch: ShardBatch }>,
    private readonly options: RouterCursorOptions,
    private readonly port: ShardCursorPort,
  ) {
    this.streams = firstBatches.map(({ shard, batch }) => ({ shard, cursorId: batch.cursorId, buffer: batch.documents, position: 0 }));
    this.skipLeft = options.skip ?? 0;
    this.limitLeft = options.limit === undefined || options.limit === 0 ? Infinity : options.limit;
  }

  /** True when no document is left to return: the limit is reached or every shard is drained. */
  get isExhausted(): boolean {
    return this.closed || this.limitLeft === 0 || this.streams.every(isDrained);
  }

  /**
   * Returns up to `batchSize` more documents, of `maxBatchBytes` at most unless there is only
   * one, fetching from shards as needed; closes the shard cursors once exhausted.
   */
  async nextBatch(batchSize: number): Promise<ValueObject[]> {
    const maxBytes = this.options.maxBatchBytes ?? MAX_BATCH_BYTES;
    const out: ValueObject[] = [];
    // Sized from the second document on: a batch of one (a point read) is never sized.
    let bytes = 0;
    while (!this.closed && out.length < batchSize && this.limitLeft > 0) {
      const need = Math.max(1, Math.min(batchSize - out.length + this.skipLeft, this.limitLeft + this.skipLeft));
      const stream = await this.nextStream(need);
      if (stream === undefined) break;
      const document = stream.buffer[stream.position]!;
      if (this.skipLeft > 0) {
        stream.position++;
        this.skipLeft--;
        continue;
      }
      const returned = this.options.project ? this.options.project(document) : document;
      if (out.length > 0) {
        if (out.length === 1) bytes = bsonSize(out[0]!);
        const size = bsonSize(returned);
        if (bytes + size > maxBytes) break; // it heads the next batch
        bytes += size;
      }
      stream.position++;
      out.push(returned);
      this.limitLeft--;
    }
    if (this.isExhausted) await this.close();
    return out;
  }

  /** Kills the shard cursors still open (errors are ignored: an idle shard cursor times out anyway). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const open = this.streams.filter((s) => s.cursorId !== null);
    await Promise.allSettled(open.map((s) => this.port.kill(s.shard, [s.cursorId!])));
    for (const stream of open) stream.cursorId = null;
  }

  /** The stream whose head is next in the merge order, after fetching what that needs; undefined when all are drained. */
  private async nextStream(need: number): Promise<ShardStream | undefined> {
    if (this.options.compare === undefined) {
      for (const stream of this.streams) {
        if (!hasBuffered(stream) && stream.cursorId !== null) await this.fetch(stream, need);
        if (hasBuffered(stream)) return stream;
      }
      return undefined;
    }
    await Promise.all(this.streams.filter((s) => !hasBuffered(s) && s.cursorId !== null).map((s) => this.fetch(s, need)));
    let best: ShardStream | undefined;
    for (const stream of this.streams) {
      if (!hasBuffered(stream)) continue;
      if (best === undefined || this.options.compare(stream.buffer[stream.position]!, best.buffer[best.position]!) < 0) best = stream;
    }
    return best;
  }

  /** Reads until the stream has a document or its shard cursor is exhausted (a getMore may return an empty batch). */
  private async fetch(stream: ShardStream, need: number): Promise<void> {
    while (!hasBuffered(stream) && stream.cursorId !== null) {
      const batch = await this.port.getMore(stream.shard, stream.cursorId, need);
      stream.cursorId = batch.cursorId;
      stream.buffer = batch.documents;
      stream.position = 0;
    }
  }
}

function hasBuffered(stream: ShardStream): boolean {
  return stream.position < stream.buffer.length;
}

function isDrained(stream: ShardStream): boolean {
  return !hasBuffered(stream) && stream.cursorId === null;
}
