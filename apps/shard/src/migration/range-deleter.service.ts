import { setTimeout as sleep } from 'node:timers/promises';
import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { DataSource, type EntityManager } from 'typeorm';
import { TesseraError } from '@tessera/core';
import { Failpoints, LOGGER, SETTINGS, queryRows } from '@tessera/platform';
import { tableName } from '../collections/collection-storage.service.js';
import { indexesForWrite, removeStoredEntries } from '../documents/index-maintenance.js';
import type { ShardSettings } from '../shard.settings.js';
import { ShardingRuntime } from '../sharding/sharding-runtime.service.js';
import { MigrationMetrics } from './migration-metrics.js';
import { MigrationReporter } from './migration-reporter.js';

/** A range this shard must delete (MongoDB's config.rangeDeletions document). */
export interface RangeDeletionTask {
  id: string;
  ns: string;
  collectionUuid: string;
  min: Buffer;
  max: Buffer;
  minEjson: string;
  maxEjson: string;
}

interface TaskRow {
  id: string;
  ns: string;
  collection_uuid: string;
  min: Buffer;
  max: Buffer;
  min_ejson: string;
  max_ejson: string;
  pending: boolean;
  deleted_documents: string;
}

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
    private readonly dataSource: DataSource,
    private readonly runtime: ShardingRuntime,
    private readonly metrics: MigrationMetrics,
    private readonly reporter: MigrationReporter,
    private readonly failpoints: Failpoints,
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

  /** Records a pending task in `manager`'s transaction; answers its id. */
  async recordPending(manager: EntityManager, task: Omit<RangeDeletionTask, 'id'> & { id?: string }): Promise<string> {
    const id = task.id ?? randomUUID();
    await manager.query(
      `INSERT INTO range_deletions (id, ns, collection_uuid, min, max, min_ejson, max_ejson, pending)
       VALUES ($1, $2, $3, $4, $5, $6, $7, true) ON CONFLICT (id) DO NOTHING`,
      [id, task.ns, task.collectionUuid, task.min, task.max, task.minEjson, task.maxEjson],
    );
    return id;
  }

  /** Makes a pending task ready, to run after `delaySecs` (the cleanup delay on a donor, 0 on a recipient). */
  async markReady(manager: EntityManager, id: string, delaySecs: number): Promise<void> {
    await manager.query(
      `UPDATE range_deletions SET pending = false, when_to_clean = now() + make_interval(secs => $2) WHERE id = $1 AND pending`,
      [id, delaySecs],
    );
  }

  /** Forgets a task (the side that kept the range). */
  async remove(manager: EntityManager, id: string): Promise<void> {
    await manager.query('DELETE FROM range_deletions WHERE id = $1', [id]);
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
    const exists = async () => ((await this.dataSource.query('SELECT 1 FROM range_deletions WHERE id = $1', [id])) as unknown[]).length > 0;
    const done = new Promise<void>((resolve) => {
      const waiting = this.finished.get(id) ?? [];
      waiting.push(resolve);
      this.finished.set(id, waiting);
    });
    if (!(await exists())) this.settle(id);
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
      const rows: Array<{ id: string; pending: boolean }> = await this.dataSource.query(
        'SELECT id, pending FROM range_deletions WHERE collection_uuid = $1 AND min < $3 AND max > $2',
        [collectionUuid, min, max],
      );
      if (rows.length === 0) return;
      const ready = rows.filter((r) => !r.pending).map((r) => r.id);
      if (ready.length > 0) {
        await this.dataSource.query('UPDATE range_deletions SET when_to_clean = now() WHERE id = ANY($1) AND when_to_clean > now()', [ready]);
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
  async pendingCount(): Promise<number> {
    const rows: Array<{ n: string }> = await this.dataSource.query('SELECT count(*) AS n FROM range_deletions');
    return Number(rows[0]?.n ?? 0);
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      let task: TaskRow | undefined;
      try {
        await this.refreshGauge();
        const rows: TaskRow[] = await this.dataSource.query(
          `SELECT id, ns, collection_uuid, min, max, min_ejson, max_ejson, pending, deleted_documents FROM range_deletions
           WHERE NOT pending AND when_to_clean <= now() ORDER BY when_to_clean, created_at LIMIT 1`,
        );
        task = rows[0];
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

  private async runTask(task: TaskRow): Promise<void> {
    const table = tableName(task.collection_uuid);
    const started = Date.now();
    // Queries that began while this shard owned the range may still read it (RangePreserver).
    await this.runtime.waitForViewsWithout(task.ns, task.min);
    let deleted = 0;
    for (;;) {
      if (this.stopped) return;
      const exists: Array<{ t: string | null }> = await this.dataSource.query('SELECT to_regclass($1) AS t', [table]);
      if (exists[0]?.t === null) break;
      const n = await this.dataSource.transaction((manager) => this.deleteBatch(manager, task, table));
      deleted += n;
      this.metrics.documentsDeleted.inc(n);
      if (n < this.settings.TESSERA_RANGE_DELETER_BATCH_SIZE) break;
      if (deleted === n) await this.failpoints.pauseAt('rangeDeleter.firstBatch', task.ns);
      await this.sleepOrWake(this.settings.TESSERA_RANGE_DELETER_BATCH_DELAY_MS, false);
    }
    await this.dataSource.query('DELETE FROM range_deletions WHERE id = $1', [task.id]);
    this.settle(task.id);
    await this.refreshGauge();
    const details = {
      min: JSON.parse(task.min_ejson) as unknown,
      max: JSON.parse(task.max_ejson) as unknown,
      documentsDeleted: deleted + Number(task.deleted_documents),
      durationMs: Date.now() - started,
    };
    this.logger.info({ ns: task.ns, ...details }, `deleted the orphaned range of ${task.ns}`);
    this.reporter.report({ what: 'rangeDeletion', ns: task.ns, details });
  }

  private async deleteBatch(manager: EntityManager, task: TaskRow, table: string): Promise<number> {
    const indexes = await indexesForWrite(manager, { table });
    const rows = await queryRows<{ id: Buffer; doc?: unknown }>(
      manager,
      `DELETE FROM ${table} WHERE id IN (SELECT id FROM ${table} WHERE shard_key >= $1 AND shard_key < $2 LIMIT $3)
       RETURNING id${indexes.length > 0 ? ', doc' : ''}`,
      [task.min, task.max, this.settings.TESSERA_RANGE_DELETER_BATCH_SIZE],
    );
    await removeStoredEntries(manager, indexes, rows);
    await manager.query('UPDATE range_deletions SET deleted_documents = deleted_documents + $2 WHERE id = $1', [task.id, rows.length]);
    return rows.length;
  }

  private async refreshGauge(): Promise<void> {
    this.metrics.rangeDeletionsPending.set(await this.pendingCount());
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
