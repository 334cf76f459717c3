import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import {
  type Chunk,
  type CollectionGeneration,
  type ShardKey,
  TesseraError,
  compareShardKeys,
  decodeKey,
  encodeKey,
  typeBracketOf,
} from '@tessera/core';
import {
  type ConfigClient,
  type DataSizeResult,
  DEFAULT_CLUSTER_SETTINGS,
  type WireChunk,
  type WireChunkRange,
  chunkRangeToWire,
  migrationHolding,
  shardKeyFromWire,
  shardKeyToWire,
} from '@tessera/protocol';
import { InternalClients, LOGGER } from '@tessera/platform';
import { ShardIdentityService } from '../identity/shard-identity.service.js';
import { ShardingRuntime } from '../sharding/sharding-runtime.service.js';
import type { FilteringMetadata } from '../sharding/sharding-state.js';
import { SplitVectorService } from './split-vector.service.js';

/** A chunk is tested for a split once this fraction of the max chunk size was written to it (MongoDB's splitTestFactor 5). */
const SPLIT_TEST_FACTOR = 5;
/** How long a collection's max chunk size and the auto-split setting are remembered before they are read again. */
const SETTINGS_TTL_MS = 10_000;

interface Tracker {
  /** Bytes written to the chunk since it was last tested (MongoDB's ChunkWritesTracker). */
  bytes: number;
  splitting: boolean;
  /** The chunk's size as its last test measured it, and which chunk that was (`chunkIdentity`). */
  measured?: { bytes: number; chunk: string };
}

/**
 * The shard's auto-splitter (MongoDB's ChunkSplitter with its per-chunk ChunkWritesTracker):
 * every write adds its bytes to its chunk's tracker; a chunk that has taken a fifth of the max
 * chunk size is tested with splitVector, and split on the config server when it holds more
 * than the max (a chunk whose documents all share one key is marked jumbo instead). For the
 * first and last chunks of the key space (where monotonically increasing or decreasing keys
 * land), the split point is the edge key itself, so the new edge chunk is small (the top-chunk
 * optimization), and the shard asks the balancer to move that small chunk off it (reason
 * `topChunk`). Split commits carry their reason (`autoSplit` or `topChunk`) to the changelog.
 * A test that leaves the chunk whole reports what it measured (bytes and documents) to the
 * config server's catalog, the chunk's size estimate there.
 *
 * A test's queries grow with the chunk (splitVector counts it when the statistics cannot rule a
 * split out, and sums it when a split may be due). The tracker keeps what the last test
 * measured: that size plus the bytes written since bounds the chunk from above, and while the
 * bound stays under the max chunk size the test is skipped, since it could only find the chunk
 * under the max. A chunk filling up is then tested about twice (at its first test and once the
 * bound reaches the max) instead of at every fifth of the max. The bound holds for writes this
 * shard notes (inserts, updates, upserts); one that a split, merge or migration changed is
 * measured again.
 */
@Injectable()
export class AutoSplitter {
  private readonly trackers = new Map<string, Tracker>();
  private readonly chunkSizes = new Map<string, { bytes: number; autoSplit: boolean; readAt: number }>();
  /** Tracker ids by the routing table's chunk objects, so a write does not encode the chunk's bound. */
  private readonly chunkIds = new WeakMap<Chunk, string>();

  constructor(
    private readonly runtime: ShardingRuntime,
    private readonly splitter: SplitVectorService,
    private readonly identity: ShardIdentityService,
    private readonly clients: InternalClients,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  /** Notes a written document (its encoded shard key and size) under the ownership view of the write. */
  noteWrite(ns: string, metadata: FilteringMetadata, shardKey: Uint8Array, bytes: number): void {
    if (metadata.info.kind !== 'sharded') return;
    const { bytes: maxChunkSize, autoSplit } = this.knownChunkSize(ns);
    if (!autoSplit) return;
    const chunk = metadata.info.table.chunkFor(shardKey);
    let id = this.chunkIds.get(chunk);
    if (id === undefined) this.chunkIds.set(chunk, (id = `${ns}\u0000${Buffer.from(encodeKey(chunk.range.min)).toString('hex')}`));
    let tracker = this.trackers.get(id);
    if (tracker === undefined) this.trackers.set(id, (tracker = { bytes: 0, splitting: false }));
    tracker.bytes += bytes;
    if (tracker.splitting || tracker.bytes < maxChunkSize / SPLIT_TEST_FACTOR) return;
    // Its size when last measured plus everything written since bounds it from above: while that
    // stays under the max, a test would find nothing to split and is skipped (see the class comment).
    const identity = chunkIdentity(chunk);
    if (tracker.measured?.chunk === identity && tracker.measured.bytes + tracker.bytes < maxChunkSize) return;
    tracker.splitting = true;
    const done = tracker;
    const counted = tracker.bytes;
    void this.trySplit(ns, chunk, metadata)
      .then((measured) => {
        done.measured = measured === undefined ? undefined : { bytes: measured, chunk: identity };
      })
      .catch((error: unknown) => {
        // A write noted under an older view can name a chunk that has been split or moved since.
        const changed = error instanceof TesseraError && ['BAD_VALUE', 'STALE_EPOCH', 'NAMESPACE_NOT_FOUND'].includes(error.code);
        const migrationId = migrationHolding(error);
        if (changed) this.logger.debug({ ns }, `skipped an auto-split of ${ns}: the chunk changed since the write`);
        // Tested again once another fifth of the max chunk size is written to it.
        else if (migrationId !== undefined)
          this.logger.info({ ns, migrationId }, `an auto-split of ${ns} waits: migration ${migrationId} holds the chunk`);
        else this.logger.warn({ err: error, ns }, `auto-split of a chunk of ${ns} failed: ${(error as Error).message}`);
      })
      .finally(() => {
        done.splitting = false;
        // What was written while the test ran still counts (the measurement may not have seen it).
        done.bytes = Math.max(0, done.bytes - counted);
      });
  }

  /** Tests the chunk; answers the bytes it holds when it was left as it was (not split, not jumbo). */
  private async trySplit(ns: string, chunk: Chunk, metadata: FilteringMetadata): Promise<number | undefined> {
    if (metadata.info.kind !== 'sharded') return undefined;
    const maxChunkSizeBytes = await this.maxChunkSize(ns);
    const range = chunkRangeToWire(chunk.range);
    const {
      result: { splitKeys, unsplittable },
      size,
    } = await this.splitter.splitVectorSized({ ns, range, maxChunkSizeBytes });
    const table = metadata.info.table;
    const generation = { epoch: table.collectionVersion.epoch, timestamp: table.collectionVersion.timestamp };
    // A chunk left whole keeps the size just measured; a split's pieces are measured at their own tests.
    if (splitKeys.length === 0) this.reportSize(ns, generation, range, size);
    if (splitKeys.length === 0 && !unsplittable) return size.size;
    const config = await this.configClient();
    if (unsplittable) {
      await config.markJumbo({ ns, generation, range });
      return undefined;
    }
    const points = splitKeys.map((k, i) => shardKeyFromWire(k, `splitKeys[${i}]`));
    const edge = await this.edgeKey(ns, chunk);
    const splitsAtEdge = edge !== undefined && !points.some((p) => compareShardKeys(p, edge) === 0);
    if (splitsAtEdge) {
      // The top chunk gets [last key, MaxKey) and the bottom chunk [MinKey, first key].
      if (isTopChunk(chunk)) points.push(edge);
      else points.unshift(edge);
    }
    const result = await config.commitSplit({
      ns,
      expectedCollectionVersion: generation,
      shard: chunk.shard,
      range,
      splitPoints: points.map(shardKeyToWire),
      reason: splitsAtEdge ? 'topChunk' : 'autoSplit',
    });
    (await this.runtime.state()).invalidate(ns);
    this.logger.info({ ns, pieces: result.chunks.length }, `auto-split a chunk of ${ns} into ${result.chunks.length}`);
    if (splitsAtEdge) this.requestTopChunkMove(ns, chunk, result.chunks);
    return undefined;
  }

  /**
   * Reports a measurement to the config server's catalog, where the balancer's statistics and the
   * control plane's sizes read it; bytes and documents together, as they come from one
   * measurement. The test does not wait for it: a lost report only leaves the older estimate.
   */
  private reportSize(ns: string, generation: CollectionGeneration, range: WireChunkRange, size: DataSizeResult): void {
    void (async () => {
      const config = await this.configClient();
      await config.recordChunkSizeEstimate({
        ns,
        generation,
        range,
        estimatedSizeBytes: size.size,
        estimatedDocuments: size.numObjects,
      });
    })().catch((error: unknown) => {
      // The chunk may have been split, merged or dropped since it was measured.
      const changed = error instanceof TesseraError && ['BAD_VALUE', 'STALE_EPOCH', 'NAMESPACE_NOT_FOUND'].includes(error.code);
      if (changed) this.logger.debug({ ns }, `dropped a size estimate of ${ns}: the chunk changed since it was measured`);
      else this.logger.warn({ err: error, ns }, `reporting a size estimate of ${ns} failed: ${(error as Error).message}`);
    });
  }

  /**
   * The top-chunk optimization's second half: ask the balancer to move the edge chunk just split
   * off to another shard, so that increasing (or decreasing) keys do not keep one shard hot. The
   * balancer decides whether and where (it may be off, or this shard the least loaded); the
   * split task does not wait for the migration.
   */
  private requestTopChunkMove(ns: string, chunk: Chunk, pieces: readonly WireChunk[]): void {
    const piece = isTopChunk(chunk) ? pieces[pieces.length - 1] : pieces[0];
    if (piece === undefined) return;
    const range = piece.range;
    void (async () => {
      const config = await this.configClient();
      const answer = await config.moveTopChunk({ ns, range, shard: chunk.shard });
      if (answer.outcome === 'scheduled')
        this.logger.info({ ns, to: answer.to }, `the balancer moves the top chunk of ${ns} to ${answer.to}`);
      else this.logger.debug({ ns, why: answer.why }, `the balancer leaves the top chunk of ${ns} here: ${answer.why}`);
    })().catch((error: unknown) =>
      this.logger.warn({ err: error, ns }, `asking the balancer to move the top chunk of ${ns} failed: ${(error as Error).message}`),
    );
  }

  /** For the first or last chunk of the key space, the key of its edge document (the highest, or the lowest). */
  private async edgeKey(ns: string, chunk: Chunk): Promise<ShardKey | undefined> {
    if (!isTopChunk(chunk) && !isBottomChunk(chunk)) return undefined;
    const key = await this.splitter.edgeKey(ns, chunk.range, isTopChunk(chunk) ? 'last' : 'first');
    if (key === undefined) return undefined;
    const decoded = decodeKey(key);
    // A split point must lie strictly inside the range.
    if (compareShardKeys(decoded, chunk.range.min) <= 0 || compareShardKeys(decoded, chunk.range.max) >= 0) return undefined;
    return decoded;
  }

  /**
   * The collection's max chunk size (its own, else the cluster's) and the cluster's auto-split
   * setting, as last read; a missing or old value is read again in the background (the write
   * does not wait), the defaults standing in until it arrives.
   */
  private knownChunkSize(ns: string): { bytes: number; autoSplit: boolean } {
    const cached = this.chunkSizes.get(ns);
    if (cached === undefined || Date.now() - cached.readAt >= SETTINGS_TTL_MS) {
      this.chunkSizes.set(ns, {
        bytes: cached?.bytes ?? DEFAULT_CLUSTER_SETTINGS.chunkSizeBytes,
        autoSplit: cached?.autoSplit ?? DEFAULT_CLUSTER_SETTINGS.autoSplit,
        readAt: Date.now(),
      });
      void this.maxChunkSize(ns).catch((error: unknown) =>
        this.logger.warn({ err: error, ns }, `cannot read the max chunk size of ${ns}: ${(error as Error).message}`),
      );
    }
    return this.chunkSizes.get(ns)!;
  }

  private async configClient(): Promise<ConfigClient> {
    return this.clients.config((await this.identity.get())!.configUrl);
  }

  private async maxChunkSize(ns: string): Promise<number> {
    const config = await this.configClient();
    const [collection, settings] = await Promise.all([config.getCollection(ns), config.settings()]);
    const bytes = collection.maxChunkSizeBytes ?? settings.chunkSizeBytes;
    this.chunkSizes.set(ns, { bytes, autoSplit: settings.autoSplit, readAt: Date.now() });
    return bytes;
  }
}

/**
 * Which chunk a measurement was of: its upper bound and version (the tracker is keyed by its
 * lower bound). A split, merge or migration gives the chunk a new version, so a measurement
 * never outlives the range it measured.
 */
function chunkIdentity(chunk: Chunk): string {
  const { epoch, timestamp, major, minor } = chunk.version;
  return `${Buffer.from(encodeKey(chunk.range.max)).toString('hex')}|${epoch}|${timestamp.t}|${timestamp.i}|${major}|${minor}`;
}

function isTopChunk(chunk: Chunk): boolean {
  return chunk.range.max.every((v) => typeBracketOf(v) === 'maxKey');
}

function isBottomChunk(chunk: Chunk): boolean {
  return chunk.range.min.every((v) => typeBracketOf(v) === 'minKey');
}
