import { setTimeout as sleep } from 'node:timers/promises';
import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type { Logger } from 'pino';
import { TesseraError } from '@tessera/core';
import { Failpoints, LOGGER, SETTINGS } from '@tessera/platform';
import { tableName } from '../collections/collection-storage.service.js';
import type { ShardSettings } from '../shard.settings.js';
import { ShardingRuntime } from '../sharding/sharding-runtime.service.js';
import { MigrationMetrics } from './migration-metrics.js';
import { MigrationReporter } from './migration-reporter.js';
import { type RangeDeletionRow, RangeDeletionStore } from './range-deletion.store.js';
import { WriteTimes } from '../history/write-times.service.js';

/** How often the queue looks for tasks whose delay has passed, when nothing woke it. */
const POLL_MS = 500;
/** How long a recipient waits for an overlapping range deletion that awaits a decision. */
const OVERLAP_WAIT_MS = 60_000;

/**
 * The range deleter (range_deleter_service): one queue per shard that deletes the documents of
 * ranges this shard no longer owns, oldest first. A task is recorded `pending` when a migration
 * starts (so a crash cannot lose it) and becomes ready when the migration's decision says this
 * side lost the range; it then waits for the queries still using an ownership view that
 * includes the range, and for `orphanCleanupDelaySecs`, and deletes in batches of
 * `rangeDeleterBatchSize` with `rangeDeleterBatchDelayMS` between them, keeping the secondary
 * indexes in step. The task is removed when the range is empty; a restart resumes where the
 * persisted tasks say.
 */
@Injectable()
export class RangeDeleterService implements OnApplicationBootstrap, OnApplicationShutdown {
  private stopped = false;
  private wake: (() => void) | undefined;
  private loop: Promise<void> | undefined;
  private readonly finished = new Map<string, Array<() => void>>();

  constructor(
    private readonly store: RangeDeletionStore,
    private readonly runtime: ShardingRuntime,
    private readonly metrics: MigrationMetrics,
    private readonly reporter: MigrationReporter,
    private readonly failpoints: Failpoints,
    private readonly writeTimes: WriteTimes,
    @Inject(SETTINGS) private readonly settings: ShardSettings,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  onApplicationBootstrap(): void {
    this.loop = this.run();
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.loop;
  }

  /** Wakes the queue: a task may have become ready. */
  poke(): void {
    this.wake?.();
  }

  /** The cleanup delay of a donor's task (`orphanCleanupDelaySecs`). */
  get donorDelaySecs(): number {
    return this.settings.TESSERA_ORPHAN_CLEANUP_DELAY_SECS;
  }

  /** Resolves when the task is gone (deleted to the end, or removed). */
  async waitForTask(id: string): Promise<void> {
    const done = new Promise<void>((resolve) => {
      const waiting = this.finished.get(id) ?? [];
      waiting.push(resolve);
      this.finished.set(id, waiting);
    });
    if (!(await this.store.exists(id))) this.settle(id);
    await done;
  }

  /**
   * What a recipient does before cloning (migration_destination_manager): waits until no task
   * overlaps the range it is about to receive. A ready task still in its cleanup delay is run
   * now (the documents are orphans the range's new owner is about to replace); a pending one
   * waits for its migration's decision, for at most a minute.
   */
  async waitForOverlapping(collectionUuid: string, min: Buffer, max: Buffer): Promise<void> {
    const deadline = Date.now() + OVERLAP_WAIT_MS;
    for (;;) {
      const rows = await this.store.overlapping(collectionUuid, min, max);
      if (rows.length === 0) return;
      const ready = rows.filter((r) => !r.pending).map((r) => r.id);
      if (ready.length > 0) {
        await this.store.runNow(ready);
        this.poke();
      }
      if (Date.now() > deadline) {
        throw new TesseraError(
          'CONFLICTING_OPERATION',
          `a range deletion overlapping the incoming range is still ${ready.length > 0 ? 'running' : 'waiting for its migration decision'}`,
          { details: { collectionUuid, tasks: rows.map((r) => r.id) } },
        );
      }
      await sleep(100);
    }
  }

  /** Tasks recorded and not finished (pending or scheduled). */
  pendingCount(): Promise<number> {
    return this.store.count();
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      let task: RangeDeletionRow | undefined;
      try {
        // Each round, so right after a task ends too: outside the task, whose report a failure to
        // count would otherwise lose.
        await this.refreshGauge();
        await this.settleVanished();
        task = await this.store.nextReady();
        if (task !== undefined) await this.runTask(task);
      } catch (error) {
        if (this.stopped) return;
        this.logger.error({ err: error, task: task?.id }, `range deletion failed: ${(error as Error).message}; will retry`);
        await this.sleepOrWake(1_000);
        continue;
      }
      if (task === undefined) await this.sleepOrWake(POLL_MS);
    }
  }

  private async runTask(task: RangeDeletionRow): Promise<void> {
    const table = tableName(task.collection_uuid);
    const started = Date.now();
    // Queries that began while this shard owned the range may still read it (RangePreserver).
    await this.runtime.waitForViewsWithout(task.ns, task.min);
    let deleted = 0;
    for (;;) {
      if (this.stopped) return;
      if (!(await this.store.tableExists(table))) break;
      const n = await this.writeTimes.run((writeTime) =>
        this.store.deleteBatch(task, table, this.settings.TESSERA_RANGE_DELETER_BATCH_SIZE, writeTime),
      );
      deleted += n;
      this.metrics.documentsDeleted.inc(n);
      if (n < this.settings.TESSERA_RANGE_DELETER_BATCH_SIZE) break;
      if (deleted === n) await this.failpoints.pauseAt('rangeDeleter.firstBatch', task.ns);
      await this.sleepOrWake(this.settings.TESSERA_RANGE_DELETER_BATCH_DELAY_MS, false);
    }
    await this.store.remove(task.id);
    this.settle(task.id);
    const details = {
      min: JSON.parse(task.min_ejson) as unknown,
      max: JSON.parse(task.max_ejson) as unknown,
      documentsDeleted: deleted + Number(task.deleted_documents),
      durationMs: Date.now() - started,
    };
    this.logger.info({ ns: task.ns, ...details }, `deleted the orphaned range of ${task.ns}`);
    this.reporter.report({ what: 'rangeDeletion', ns: task.ns, details });
  }

  private async refreshGauge(): Promise<void> {
    this.metrics.rangeDeletionsPending.set(await this.pendingCount());
  }

  /**
   * Answers the waiters of tasks that went without this queue removing them: removed by their
   * migration's end, or by a removal whose answer was lost (so it failed here but took effect).
   */
  private async settleVanished(): Promise<void> {
    for (const id of [...this.finished.keys()]) {
      if (!(await this.store.exists(id))) this.settle(id);
    }
  }

  private settle(id: string): void {
    for (const resolve of this.finished.get(id) ?? []) resolve();
    this.finished.delete(id);
  }

  private sleepOrWake(ms: number, wakeable = true): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      timer.unref();
      if (wakeable) this.wake = done;
      function done() {
        clearTimeout(timer);
        resolve();
      }
    });
  }
}
