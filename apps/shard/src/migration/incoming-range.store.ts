import { Injectable } from '@nestjs/common';
import { DataSource, type EntityManager } from 'typeorm';
import { TesseraError, type ValueObject, fromExtendedJsonObject, parseShardKeyPattern } from '@tessera/core';
import type { IndexSpec, RecvChunkStartRequest, TransferredDocument } from '@tessera/protocol';
import { queryRows } from '@tessera/platform';
import { SecondaryIndexCatalog } from '../documents/index-catalog.js';
import { type SecondaryIndex, addEntries, entriesOf, indexesForWrite, removeStoredEntries } from '../documents/index-maintenance.js';
import { type CopiedRow, copyRowsIn } from './copy-transfer.js';
import { type WriteTime, declareWriteTime } from '../history/write-time.js';

/** Where a received range goes: the collection's table and the range's encoded bounds. */
export interface IncomingRange {
  ns: string;
  table: string;
  min: Buffer;
  max: Buffer;
}

/**
 * The recipient's writes of a range it receives: the donor's secondary indexes, cloned batches
 * (COPY) and captured writes, each batch with its secondary index entries in one transaction,
 * stamped with the recipient's write time.
 */
@Injectable()
export class IncomingRangeStore {
  private readonly indexes: SecondaryIndexCatalog;

  constructor(private readonly dataSource: DataSource) {
    this.indexes = new SecondaryIndexCatalog(dataSource);
  }

  /** Builds the donor's secondary indexes here (those that exist already stay). */
  async createIndexes(request: RecvChunkStartRequest, table: string): Promise<void> {
    await this.createIndexesOf(
      { uuid: request.collectionUuid, table, ns: request.ns, keyPattern: request.keyPattern, sharded: true },
      request.indexes,
    );
  }

  /** Builds a donor's secondary indexes on a collection here (those that exist already stay). */
  async createIndexesOf(
    collection: { uuid: string; table: string; ns: string; keyPattern: Record<string, 1 | 'hashed'>; sharded: boolean },
    indexes: readonly IndexSpec[],
  ): Promise<void> {
    if (indexes.length === 0) return;
    await this.indexes.create({ ...collection, shardKey: parseShardKeyPattern(collection.keyPattern) }, indexes);
  }

  /** Writes a cloned batch (new documents here) with COPY, and their secondary index entries, in one transaction. */
  async applyClone(range: Pick<IncomingRange, 'ns' | 'table'>, text: string, rows: CopiedRow[], writeTime: WriteTime): Promise<void> {
    if (rows.length === 0) return;
    const runner = this.dataSource.createQueryRunner();
    await runner.connect();
    await runner.startTransaction();
    try {
      await declareWriteTime(runner.manager, writeTime);
      const indexes = await indexesForWrite(runner.manager, { table: range.table });
      await copyRowsIn(runner, range.table, text, range.ns);
      await addIndexEntries(runner.manager, range.ns, indexes, rows);
      await runner.commitTransaction();
    } catch (error) {
      await runner.rollbackTransaction();
      throw error;
    } finally {
      await runner.release();
    }
  }

  /**
   * Applies captured writes in one transaction, secondary indexes included: each document is
   * replaced by its current version or deleted. An `_id` that exists here outside the range
   * fails the migration with `DUPLICATE_KEY`: `_id` is unique per shard.
   */
  async applyMods(range: IncomingRange, documents: TransferredDocument[], writeTime: WriteTime): Promise<void> {
    if (documents.length === 0) return;
    const { table, min, max, ns } = range;
    await this.dataSource.transaction(async (manager) => {
      await declareWriteTime(manager, writeTime);
      const indexes = await indexesForWrite(manager, { table });
      const removed = await queryRows<{ id: Buffer; doc?: unknown }>(
        manager,
        `DELETE FROM ${table} WHERE id = ANY($1) AND shard_key >= $2 AND shard_key < $3 RETURNING id${indexes.length > 0 ? ', doc' : ''}`,
        [documents.map((d) => Buffer.from(d.id, 'hex')), min, max],
      );
      await removeStoredEntries(manager, indexes, removed);
      const upserts = documents.filter((d) => d.op === 'u');
      if (upserts.length === 0) return;
      const inserted: unknown[] = await manager.query(
        `INSERT INTO ${table} (id, shard_key, doc, size)
         SELECT decode(i, 'hex'), decode(k, 'hex'), d::json, s FROM unnest($1::text[], $2::text[], $3::text[], $4::int[]) AS u(i, k, d, s)
         ON CONFLICT (id) DO NOTHING RETURNING 1`,
        [upserts.map((d) => d.id), upserts.map((d) => d.key), upserts.map((d) => d.doc), upserts.map((d) => d.size)],
      );
      if (inserted.length < upserts.length) {
        throw new TesseraError(
          'DUPLICATE_KEY',
          `a document of the incoming range of ${ns} has an _id that this shard already holds in another range`,
          {
            details: { ns },
          },
        );
      }
      await addIndexEntries(manager, ns, indexes, upserts);
    });
  }
}

async function addIndexEntries(
  manager: EntityManager,
  ns: string,
  indexes: readonly SecondaryIndex[],
  rows: ReadonlyArray<{ id: string; doc: string }>,
) {
  if (indexes.length === 0) return;
  const entries = rows.map((d) => entriesOf(indexes, Buffer.from(d.id, 'hex'), fromExtendedJsonObject(JSON.parse(d.doc)) as ValueObject));
  const conflicts = await addEntries(manager, ns, indexes, entries);
  const first = conflicts.values().next();
  if (!first.done) throw first.value;
}
