import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import {
  type DataSizeRequest,
  type DataSizeResult,
  type StatsForBalancingRequest,
  type StatsForBalancingResult,
  chunkRangeFromWire,
  dataSizeRequestSchema,
  statsForBalancingRequestSchema,
} from '@tessera/protocol';
import { parseWith } from '@tessera/platform';
import { CollectionStorageService, tableName } from '../collections/collection-storage.service.js';
import { localTable, rangeCondition, sumRange } from './range-query.js';

/**
 * MongoDB's `dataSize` and the balancer's `statsForBalancing` on this shard's copy of a
 * collection: what the balancer and migrations size ranges and collections with (`splitVector`
 * is `SplitVectorService`'s). `dataSize` reads the documents stored in the range (orphans
 * included, as MongoDB's does); a collection this shard does not store is empty.
 * `statsForBalancing` leaves the orphans out.
 */
@Injectable()
export class ChunkSizingService {
  /** Ready range deletion tasks' orphans as summed once, by task id (see `orphanBytes`). */
  private readonly measuredOrphans = new Map<string, { uuid: string; bytes: number; documents: number; deletedThen: number }>();

  constructor(
    private readonly dataSource: DataSource,
    private readonly storage: CollectionStorageService,
  ) {}

  async dataSize(input: DataSizeRequest): Promise<DataSizeResult> {
    const request = parseWith(dataSizeRequestSchema, input, 'dataSize request');
    const table = await localTable(this.storage, request.ns);
    if (table === undefined) return { size: 0, numObjects: 0 };
    const { where, params } = rangeCondition(request.range && chunkRangeFromWire(request.range));
    return sumRange(this.dataSource, table, where, params);
  }

  /**
   * The bytes of each collection this shard owns: what it stores (its totals in
   * `collection_sizes`, which the writes keep up to date, see
   * migrations/shard/1764700000000-collection-sizes.ts) less what it stores in the ranges of its
   * range deletion tasks that hold orphans, which are the ready ones (a range given away, or a
   * received copy of an aborted migration) and the pending ones of ranges it is receiving (MongoDB
   * subtracts its `numOrphanDocs` the same way). A donor's pending task covers a range it still
   * owns until its migration commits, so that range counts. Without this, a donor would weigh
   * as much as before its migrations until their ranges are cleaned, and the balancer would move
   * more than needed. The work is the changes since the last request and the orphans' index
   * entries, not the collection.
   */
  async statsForBalancing(input: StatsForBalancingRequest): Promise<StatsForBalancingResult> {
    const request = parseWith(statsForBalancingRequestSchema, input, 'statsForBalancing request');
    await this.foldSizeChanges();
    const stats = await Promise.all(
      request.namespaces.map(async (ns) => {
        const local = await this.storage.localCollection(ns);
        if (local === undefined) return { ns, collSize: 0 };
        const stored: Array<{ bytes: string }> = await this.dataSource.query(
          'SELECT bytes FROM collection_sizes WHERE collection_uuid = $1',
          [local.uuid],
        );
        return { ns, collSize: Number(stored[0]?.bytes ?? 0) - (await this.orphanBytes(local.uuid)) };
      }),
    );
    return { stats };
  }

  /**
   * Adds the changes the writes appended to each collection's totals, in one statement: a change
   * committed meanwhile is not deleted, so it is left for the next fold, and two folds at once
   * add each change once (the second skips the rows the first deleted).
   */
  private async foldSizeChanges(): Promise<void> {
    await this.dataSource.query(
      `WITH folded AS (DELETE FROM collection_size_changes RETURNING collection_uuid, bytes, documents),
            summed AS (SELECT collection_uuid, sum(bytes) AS bytes, sum(documents) AS documents FROM folded GROUP BY collection_uuid)
       UPDATE collection_sizes s SET bytes = s.bytes + summed.bytes, documents = s.documents + summed.documents
         FROM summed WHERE s.collection_uuid = summed.collection_uuid`,
    );
  }

  /**
   * The bytes stored in the collection's orphan ranges (see `statsForBalancing`), overlapping
   * ranges counted once. A ready task's range takes no more writes and only shrinks as the range
   * deleter deletes it, so it is summed once (`measuredOrphans`) and then scaled by the share of
   * its documents not deleted since; a range being received, or several that overlap, are summed
   * at each request.
   */
  private async orphanBytes(uuid: string): Promise<number> {
    const tasks: OrphanTask[] = await this.dataSource.query(
      `SELECT id, min, max, pending, deleted_documents FROM range_deletions r
        WHERE r.collection_uuid = $1 AND (NOT r.pending OR EXISTS (SELECT 1 FROM migration_recipients m WHERE m.id = r.id))`,
      [uuid],
    );
    const present = new Set(tasks.map((t) => t.id));
    for (const [id, measured] of this.measuredOrphans) if (measured.uuid === uuid && !present.has(id)) this.measuredOrphans.delete(id);
    let bytes = 0;
    for (const group of overlapping(tasks)) {
      const task = group.length === 1 && !group[0]!.pending ? group[0]! : undefined;
      const deleted = Number(task?.deleted_documents ?? 0);
      let measured = task && this.measuredOrphans.get(task.id);
      if (measured === undefined) {
        const min = group[0]!.min;
        const max = group.reduce((m, t) => (Buffer.compare(t.max, m) > 0 ? t.max : m), group[0]!.max);
        const sum = await sumRange(this.dataSource, tableName(uuid), 'shard_key >= $1 AND shard_key < $2', [min, max]);
        measured = { uuid, bytes: sum.size, documents: sum.numObjects, deletedThen: deleted };
        if (task !== undefined) this.measuredOrphans.set(task.id, measured);
      }
      const left = measured.documents - (deleted - measured.deletedThen);
      bytes += measured.documents === 0 ? 0 : Math.round((measured.bytes * Math.max(0, left)) / measured.documents);
    }
    return bytes;
  }
}

/** A range deletion task whose range holds orphans (see `statsForBalancing`). */
interface OrphanTask {
  id: string;
  min: Buffer;
  max: Buffer;
  pending: boolean;
  deleted_documents: string;
}

/** `tasks` in groups whose ranges overlap (encoded keys, compared as Postgres compares bytea), each sorted by its start. */
function overlapping(tasks: readonly OrphanTask[]): OrphanTask[][] {
  const sorted = [...tasks].sort((a, b) => Buffer.compare(a.min, b.min));
  const groups: Array<{ max: Buffer; tasks: OrphanTask[] }> = [];
  for (const task of sorted) {
    const last = groups.at(-1);
    if (last !== undefined && Buffer.compare(task.min, last.max) < 0) {
      last.tasks.push(task);
      if (Buffer.compare(task.max, last.max) > 0) last.max = task.max;
    } else groups.push({ max: task.max, tasks: [task] });
  }
  return groups.map((g) => g.tasks);
}
