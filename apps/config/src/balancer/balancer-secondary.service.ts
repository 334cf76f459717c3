import { Inject, Injectable, type OnApplicationShutdown } from '@nestjs/common';
import type { Logger } from 'pino';
import {
  type AutoMergeAction,
  type AutoMergerSettings,
  type ChunkRange,
  type DefragmentationAction,
  type DefragmentationOutcome,
  type DefragmentationSettings,
  DEFAULT_AUTO_MERGER_SETTINGS,
  DEFAULT_DEFRAGMENTATION_SETTINGS,
  type Chunk,
  type SizedChunk,
  TesseraError,
  capRunBySize,
  mergeRanges,
  findMergeableRuns,
  nextDefragmentationActions,
  onDefragmentationOutcome,
  rangesOverlap,
  selectAutoMergeActions,
} from '@tessera/core';
import { type ClusterSettings, type PlacementReason, chunkRangeToWire, migrationHolding } from '@tessera/protocol';
import { InternalClients, LOGGER, SETTINGS } from '@tessera/platform';
import type { CollectionRow } from '../catalog/catalog-rows.js';
import { MetadataCommitService } from '../catalog/metadata-commit.service.js';
import type { ConfigSettings } from '../config.settings.js';
import { ClusterSettingsService } from '../settings/cluster-settings.service.js';
import { BalancerCatalogStore } from './balancer-catalog.store.js';
import { maxChunkSizeBytesOf } from './cluster-statistics.service.js';
import { DefragmentationStore } from './defragmentation.store.js';

/** MongoDB's bound on the secondary thread's outstanding operations. */
const MAX_IN_FLIGHT = DEFAULT_DEFRAGMENTATION_SETTINGS.maxActionsInFlight;
/** A merge whose compare-and-set lost to another commit reads the version again, this many times. */
const MERGE_ATTEMPTS = 5;

/**
 * The balancer's secondary loop (MongoDB's Balancer::_secondaryThread) on the config leader. It
 * sleeps until signalled (by the main loop, by `configureCollectionBalancing`, or by its own
 * timers) and issues, without waiting for them, the non-migration actions of two policies:
 *
 * - defragmentation's merges and `dataSize` commands, one every `defragmentationThrottlingMS`,
 *   each outcome fed back to the machine;
 * - the auto-merger: every `autoMergerIntervalSecs` a pass that, while mergeable chunks remain,
 *   issues up to 10 `mergeAllChunksOnShard` actions at a time, `autoMergerThrottlingMS` apart.
 *
 * At most 50 operations are outstanding. Every merge is a `commitMerge` with its reason
 * (`defragmentation`, `autoMerge`) in the changelog row. See README.md beside this file.
 */
@Injectable()
export class BalancerSecondaryService implements OnApplicationShutdown {
  private running = false;
  /** Bumped on every start and stop, so a loop of an earlier term ends instead of running beside the new one. */
  private term = 0;
  private wake: (() => void) | undefined;
  private inFlight = 0;
  private lastDefragmentationIssue = 0;
  private nextAutoMergerScan = 0;
  private autoMergerRunning = false;
  private readonly autoMerger: AutoMergerSettings;
  private readonly defragmentation: DefragmentationSettings;

  constructor(
    private readonly catalog: BalancerCatalogStore,
    private readonly clusterSettings: ClusterSettingsService,
    private readonly store: DefragmentationStore,
    private readonly commits: MetadataCommitService,
    private readonly clients: InternalClients,
    @Inject(SETTINGS) settings: ConfigSettings,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {
    this.autoMerger = {
      ...DEFAULT_AUTO_MERGER_SETTINGS,
      autoMergerIntervalSecs: settings.TESSERA_AUTO_MERGER_INTERVAL_SECS,
      autoMergerThrottlingMS: settings.TESSERA_AUTO_MERGER_THROTTLING_MS,
      minSnapshotHistoryWindowInSeconds: settings.TESSERA_MIN_SNAPSHOT_HISTORY_WINDOW_SECS,
      transactionLifetimeLimitSeconds: settings.TESSERA_TRANSACTION_LIFETIME_LIMIT_SECS,
    };
    this.defragmentation = {
      ...DEFAULT_DEFRAGMENTATION_SETTINGS,
      defragmentationThrottlingMS: settings.TESSERA_DEFRAGMENTATION_THROTTLING_MS,
    };
  }

  /** Starts the loop (on election); the auto-merger scans at once, then every interval. */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.nextAutoMergerScan = 0;
    void this.loop(++this.term);
  }

  stop(): void {
    this.running = false;
    this.term++;
    this.signal();
  }

  onApplicationShutdown(): void {
    this.stop();
  }

  /** Wakes the loop: there may be work (a defragmentation outcome, a setting changed). */
  signal(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  private async loop(term: number): Promise<void> {
    while (term === this.term) {
      let delay = 60_000;
      try {
        delay = await this.work();
      } catch (error) {
        this.logger.warn({ err: error }, `balancer secondary loop: ${(error as Error).message}`);
        delay = 1_000;
      }
      if (term !== this.term) return;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.max(10, delay));
        timer.unref();
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  }

  /** Issues what is due; answers how long to sleep unless signalled. */
  private async work(): Promise<number> {
    const settings = await this.clusterSettings.get();
    if (settings.balancer.mode !== 'full') return 5_000;
    const now = Date.now();
    let delay = Math.max(0, this.nextAutoMergerScan - now);
    if (now >= this.nextAutoMergerScan && !this.autoMergerRunning) {
      this.autoMergerRunning = true;
      void this.autoMergerPass(this.term)
        .catch((error: unknown) => this.logger.warn({ err: error }, `auto-merger pass failed: ${(error as Error).message}`))
        .finally(() => {
          this.autoMergerRunning = false;
          this.nextAutoMergerScan = Date.now() + this.autoMerger.autoMergerIntervalSecs * 1000;
          this.signal();
        });
      delay = this.autoMerger.autoMergerIntervalSecs * 1000;
    }
    const defragmenting = await this.catalog.defragmentingCollections();
    if (defragmenting.length > 0) {
      const wait = this.lastDefragmentationIssue + this.defragmentation.defragmentationThrottlingMS - now;
      if (wait > 0) return Math.min(delay, wait);
      if (this.inFlight < MAX_IN_FLIGHT) await this.issueDefragmentationAction(defragmenting, settings);
      delay = Math.min(delay, Math.max(this.defragmentation.defragmentationThrottlingMS, 50));
    }
    return delay;
  }

  /** Issues the next merge or `dataSize` of the first collection that has one (MongoDB issues one per throttle interval). */
  private async issueDefragmentationAction(rows: readonly CollectionRow[], settings: ClusterSettings): Promise<void> {
    for (const row of rows) {
      await this.store.load(row);
      const chunks = await this.catalog.chunks(row);
      // Read, change and keep the state with no await between: the main loop and outcomes change it too.
      const state = this.store.current(row.ns);
      if (state === undefined) continue;
      const next = nextDefragmentationActions(
        state,
        { chunks, maxChunkSizeBytes: maxChunkSizeBytesOf(row, settings) },
        this.defragmentation,
        1,
      );
      await this.store.save(next.state);
      const action = next.actions[0];
      if (action === undefined) continue;
      this.lastDefragmentationIssue = Date.now();
      this.inFlight++;
      void this.runDefragmentationAction(row, action).finally(() => {
        this.inFlight--;
        this.signal();
      });
      return;
    }
  }

  private async runDefragmentationAction(row: CollectionRow, action: DefragmentationAction): Promise<void> {
    let outcome: DefragmentationOutcome;
    try {
      if (action.kind === 'merge') {
        await this.merge(row, action.shard, action.range, 'defragmentation');
        outcome = { ok: true };
      } else if (action.kind === 'dataSize') {
        const shard = (await this.catalog.shards()).find((s) => s.name === action.shard);
        if (shard === undefined) throw new TesseraError('SHARD_NOT_FOUND', `shard ${action.shard} is not registered`);
        const { size } = await this.clients.migration(shard.url).dataSize({ ns: row.ns, range: chunkRangeToWire(action.range) });
        outcome = { ok: true, dataSizeBytes: size };
      } else {
        return; // migrations belong to the main loop
      }
    } catch (error) {
      const retryable = error instanceof TesseraError && error.retryable;
      outcome = { ok: false, retryable, error: (error as Error).message };
      this.logger.info(
        { err: error, ns: row.ns, migrationId: migrationHolding(error) },
        `defragmentation ${action.kind} of ${row.ns} failed: ${(error as Error).message}`,
      );
    }
    const state = this.store.current(row.ns);
    if (state !== undefined) await this.store.save(onDefragmentationOutcome(state, action, outcome));
  }

  /**
   * One auto-merger pass (the reference's loop): while mergeable chunks remain, issue up to 10
   * `mergeAllChunksOnShard` actions (shard by shard, then namespace), then wait the throttle.
   */
  private async autoMergerPass(term: number): Promise<void> {
    for (;;) {
      if (term !== this.term) return;
      const settings = await this.clusterSettings.get();
      if (settings.balancer.mode !== 'full') return;
      // Not a collection being defragmented (its merges are defragmentation's), nor one a DDL holds.
      const rows = (await this.catalog.allCollections()).filter(
        (r) => r.auto_merging_enabled && !r.defragment_collection && r.allow_migrations,
      );
      const collections = await Promise.all(
        rows.map(async (row) => ({
          namespace: row.ns,
          chunks: await this.catalog.chunks(row),
          zones: await this.catalog.zones(row.ns),
          autoMergerEnabled: true,
          row,
        })),
      );
      const nowSeconds = Date.now() / 1000;
      const actions = selectAutoMergeActions(collections, nowSeconds, this.autoMerger, 0).slice(
        0,
        Math.max(0, MAX_IN_FLIGHT - this.inFlight),
      );
      if (actions.length === 0) return;
      this.inFlight += actions.length;
      const merged = await Promise.all(
        actions.map((action) =>
          this.mergeAllChunksOnShard(collections.find((c) => c.namespace === action.namespace)!.row, action, nowSeconds, settings).finally(
            () => this.inFlight--,
          ),
        ),
      );
      // Nothing could be merged (every run busy or refused): the next scan tries again.
      if (merged.every((n) => n === 0)) return;
      await new Promise((resolve) => setTimeout(resolve, this.autoMerger.autoMergerThrottlingMS).unref());
    }
  }

  /**
   * MongoDB's mergeAllChunksOnShard: merges every mergeable run of `ns` on `shard`, each cut so
   * that no merged chunk exceeds the collection's max chunk size (`capRunBySize`; sizes from the
   * catalog's estimates, else the shard's `dataSize`); answers how many merges it made.
   */
  private async mergeAllChunksOnShard(
    row: CollectionRow,
    action: AutoMergeAction,
    nowSeconds: number,
    settings: ClusterSettings,
  ): Promise<number> {
    const chunks = await this.catalog.chunks(row);
    const zones = await this.catalog.zones(row.ns);
    const migrating = await this.catalog.migratingRanges(row);
    const shard = (await this.catalog.shards()).find((s) => s.name === action.shard);
    if (shard === undefined) return 0;
    const maxBytes = maxChunkSizeBytesOf(row, settings);
    let merged = 0;
    for (const run of findMergeableRuns(chunks, nowSeconds, this.autoMerger, action.shard, zones)) {
      const holding = migrating.find((m) => rangesOverlap(m.range, run.range));
      if (holding !== undefined) {
        this.logger.info(
          { ns: row.ns, migrationId: holding.id },
          `auto-merge of ${row.ns} on ${action.shard} waits for migration ${holding.id}, which holds part of the run; the next pass tries again`,
        );
        continue;
      }
      try {
        const sizes = new Map<Chunk, number>();
        for (const chunk of run.chunks) {
          const known = (chunk as SizedChunk).estimatedSizeBytes;
          sizes.set(
            chunk,
            known ?? (await this.clients.migration(shard.url).dataSize({ ns: row.ns, range: chunkRangeToWire(chunk.range) })).size,
          );
        }
        for (const piece of capRunBySize(run.chunks, (c) => sizes.get(c) ?? 0, maxBytes)) {
          await this.merge(row, action.shard, mergeRanges(piece.map((c) => c.range)), 'autoMerge');
          merged++;
        }
      } catch (error) {
        this.logger.info(
          { err: error, ns: row.ns, migrationId: migrationHolding(error) },
          `auto-merge of ${row.ns} on ${action.shard} failed: ${(error as Error).message}`,
        );
      }
    }
    return merged;
  }

  /** `commitMerge` on the collection version read just before; a lost compare-and-set reads it again. */
  private async merge(row: CollectionRow, shard: string, range: ChunkRange, reason: PlacementReason): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const version = await this.catalog.collectionVersion(row);
      try {
        await this.commits.commitMerge({ ns: row.ns, expectedCollectionVersion: version, shard, range: chunkRangeToWire(range), reason });
        return;
      } catch (error) {
        // A lost compare-and-set is tried again at once; a range in migration waits for a later pass.
        const conflict = error instanceof TesseraError && error.code === 'CONFLICTING_OPERATION';
        if (!conflict || migrationHolding(error) !== undefined || attempt >= MERGE_ATTEMPTS) throw error;
      }
    }
  }
}
