import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { DataSource, type EntityManager } from 'typeorm';
import { queryRows } from '@tessera/platform';
import { type WriteTime, declareWriteTime } from '../history/write-time.js';
import { indexesForWrite, removeStoredEntries } from '../documents/index-maintenance.js';

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

/** A task as `range_deletions` stores it. */
export interface RangeDeletionRow {
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

/**
 * The range deleter's queue, `range_deletions`, and the deletes of its batches. Methods that take
 * a manager run in the caller's transaction (a migration records or settles its task together
 * with its own documents).
 */
@Injectable()
export class RangeDeletionStore {
  constructor(private readonly dataSource: DataSource) {}

  /** Records a pending task; answers its id. */
  async recordPending(
    task: Omit<RangeDeletionTask, 'id'> & { id?: string },
    manager: EntityManager = this.dataSource.manager,
  ): Promise<string> {
    const id = task.id ?? randomUUID();
    await manager.query(
      `INSERT INTO range_deletions (id, ns, collection_uuid, min, max, min_ejson, max_ejson, pending)
       VALUES ($1, $2, $3, $4, $5, $6, $7, true) ON CONFLICT (id) DO NOTHING`,
      [id, task.ns, task.collectionUuid, task.min, task.max, task.minEjson, task.maxEjson],
    );
    return id;
  }

  /** Makes a pending task ready, to run after `delaySecs`. */
  async markReady(manager: EntityManager, id: string, delaySecs: number): Promise<void> {
    await manager.query(
      `UPDATE range_deletions SET pending = false, when_to_clean = now() + make_interval(secs => $2) WHERE id = $1 AND pending`,
      [id, delaySecs],
    );
  }

  /** Forgets a task: the side that kept the range, or a task deleted to its end. */
  async remove(id: string, manager: EntityManager = this.dataSource.manager): Promise<void> {
    await manager.query('DELETE FROM range_deletions WHERE id = $1', [id]);
  }

  async exists(id: string): Promise<boolean> {
    return ((await this.dataSource.query('SELECT 1 FROM range_deletions WHERE id = $1', [id])) as unknown[]).length > 0;
  }

  /** Tasks of the collection whose range overlaps [min, max). */
  overlapping(collectionUuid: string, min: Buffer, max: Buffer): Promise<Array<{ id: string; pending: boolean }>> {
    return this.dataSource.query('SELECT id, pending FROM range_deletions WHERE collection_uuid = $1 AND min < $3 AND max > $2', [
      collectionUuid,
      min,
      max,
    ]);
  }

  /** Ends the cleanup delay of ready tasks now. */
  async runNow(ids: readonly string[]): Promise<void> {
    await this.dataSource.query('UPDATE range_deletions SET when_to_clean = now() WHERE id = ANY($1) AND when_to_clean > now()', [ids]);
  }

  /** Tasks recorded and not finished (pending or scheduled). */
  async count(): Promise<number> {
    const rows: Array<{ n: string }> = await this.dataSource.query('SELECT count(*) AS n FROM range_deletions');
    return Number(rows[0]?.n ?? 0);
  }

  /** The ready task whose delay ended first. */
  async nextReady(): Promise<RangeDeletionRow | undefined> {
    const rows: RangeDeletionRow[] = await this.dataSource.query(
      `SELECT id, ns, collection_uuid, min, max, min_ejson, max_ejson, pending, deleted_documents FROM range_deletions
       WHERE NOT pending AND when_to_clean <= now() ORDER BY when_to_clean, created_at LIMIT 1`,
    );
    return rows[0];
  }

  /** Whether the collection's table is still there (a dropped collection leaves nothing to delete). */
  async tableExists(table: string): Promise<boolean> {
    const exists: Array<{ t: string | null }> = await this.dataSource.query('SELECT to_regclass($1) AS t', [table]);
    return exists[0]?.t !== null;
  }

  /**
   * Deletes at most `limit` documents of the task's range from `table`, their secondary index
   * entries and the task's count in one transaction; answers how many went.
   */
  deleteBatch(task: RangeDeletionRow, table: string, limit: number, writeTime: WriteTime): Promise<number> {
    return this.dataSource.transaction(async (manager) => {
      // The deleted documents stay readable at earlier times: they are versions that end now.
      await declareWriteTime(manager, writeTime);
      const indexes = await indexesForWrite(manager, { table });
      const rows = await queryRows<{ id: Buffer; doc?: unknown }>(
        manager,
        `DELETE FROM ${table} WHERE id IN (SELECT id FROM ${table} WHERE shard_key >= $1 AND shard_key < $2 LIMIT $3)
         RETURNING id${indexes.length > 0 ? ', doc' : ''}`,
        [task.min, task.max, limit],
      );
      await removeStoredEntries(manager, indexes, rows);
      await manager.query('UPDATE range_deletions SET deleted_documents = deleted_documents + $2 WHERE id = $1', [task.id, rows.length]);
      return rows.length;
    });
  }
}
