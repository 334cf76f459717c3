import type { ObjectId } from 'bson';
import type { DataSource, EntityManager } from 'typeorm';
import { type ChunkRange, type ShardKeyPattern, TesseraError } from '@tessera/core';
import { poolStatement } from '@tessera/platform';
import { type PreparedRow, ROWS_FROM, insertUnindexedSql, prepareRow, recordedInserts, rowParameters } from './prepared-rows.js';
import type { StatementHistory } from './statement-history.js';
import { type WriteTime, declareWriteTime } from '../history/write-time.js';
import { type WriteError, duplicateKey, isUniqueViolation, toEnvelope, withStatement } from './write-errors.js';
import { type DocumentEntries, type SecondaryIndex, addEntries, entriesOf, indexesForWrite, removeEntries } from './index-maintenance.js';

/** What the retryable insert's single statement raises when a secondary index kept it from storing its rows. */
const ALL_STORED = 'ROWS_NOT_ALL_STORED';

/** One collection's table on this shard, with the ownership view a request was checked against. */
export interface CollectionHandle {
  ns: string;
  /** `c_<uuid>`, from `tableName`. */
  table: string;
  /** The shard key pattern; `{ _id: 1 }` for an unsharded collection. */
  pattern: ShardKeyPattern;
  /** True when this shard owns the encoded shard key (false for orphans). */
  owns(encodedKey: Uint8Array): boolean;
  /** The key ranges `owns` is true for (absent on a snapshot read, whose ownership is historical). */
  ownedRanges?: () => 'all' | 'none' | readonly ChunkRange[];
  /** The secondary indexes a scan may use (their side tables); none when absent. */
  indexes?: ReadonlyArray<{ pattern: ShardKeyPattern; table: string }>;
  /** Told of each document a write stores (its encoded shard key and size): the auto-splitter's tracker. */
  onWrite?: (shardKey: Uint8Array, bytes: number) => void;
  /** A write's time, which stamps the rows it stores and ends the versions it replaces. */
  writeTime?: WriteTime;
  /** A read at a past time: the collection's rows and kept versions as they were then. */
  snapshot?: { collectionUuid: string; time: WriteTime['sql'] };
  /** A statement of a cross-shard transaction: it runs in the transaction's own Postgres transaction. */
  transaction?: TransactionWork;
}

/**
 * What a statement of a transaction runs with. The transaction reads at its snapshot (the
 * handle's `snapshot`) and stamps what it writes with that same time until its commit restamps
 * it (its `writeTime`), so its own writes are visible to its reads and the versions it replaced
 * are not. `wrote` is told of every document it stores, changes or deletes.
 */
export interface TransactionWork {
  manager: EntityManager;
  wrote(handle: CollectionHandle, id: Buffer, shardKey: Uint8Array): void;
}

/**
 * Runs `work` in the handle's transaction when it is a transaction's statement, else in a
 * transaction of its own with the write's time declared first (the history trigger reads it).
 */
export function inWriteTransaction<T>(
  dataSource: DataSource,
  handle: CollectionHandle,
  work: (manager: EntityManager) => Promise<T>,
): Promise<T> {
  if (handle.transaction !== undefined) return work(handle.transaction.manager);
  return dataSource.transaction(async (manager) => {
    await declareWriteTime(manager, writeTimeOf(handle));
    return work(manager);
  });
}

/** The write's time; a write path without one is a bug. */
export function writeTimeOf(handle: CollectionHandle): WriteTime {
  if (handle.writeTime === undefined) throw new Error(`a write to ${handle.ns} ran without a write time`);
  return handle.writeTime;
}

export interface InsertResult {
  insertedCount: number;
  /** The indexes of the documents inserted, ascending. */
  inserted: number[];
  writeErrors: WriteError[];
}

/**
 * Documents of one collection in its Postgres table: the primitives the shard's CRUD commands
 * are built from. Documents are stored as relaxed Extended JSON (exact for every value
 * libs/core models, field order kept) with their encoded `_id` and shard key.
 */
export class DocumentStore {
  constructor(private readonly dataSource: DataSource) {}

  /**
   * Inserts documents with MongoDB's batch semantics: each invalid document or duplicate key is
   * a write error for its index; `ordered` stops at the first error, keeping what came before
   * it; unordered goes on. A document whose shard key this shard does not own means the sender's
   * routing was stale: the whole request fails with `STALE_CONFIG` and nothing is written.
   *
   * With a `history` (a retryable write) a document whose statement already executed is not
   * inserted again but counts as inserted, and each document stored is recorded in the
   * transaction that stores it.
   */
  async insert(
    handle: CollectionHandle,
    documents: readonly unknown[],
    options: { ordered: boolean; generateId: () => ObjectId; history?: StatementHistory | undefined },
  ): Promise<InsertResult> {
    const { history } = options;
    const rows: PreparedRow[] = [];
    const writeErrors: WriteError[] = [];
    const retried: number[] = [];
    for (const [index, input] of documents.entries()) {
      if (history !== undefined && history.executed(index) !== undefined) {
        retried.push(index);
        continue;
      }
      try {
        rows.push(prepareRow(handle, input, index, options.generateId));
      } catch (error) {
        if (error instanceof TesseraError && error.code === 'STALE_CONFIG') throw error;
        writeErrors.push({ index, error: toEnvelope(error) });
        if (options.ordered) break;
      }
    }
    const inserted =
      rows.length === 0
        ? new Set<string>()
        : history === undefined
          ? ((await this.insertIfUnindexed(handle, rows)) ?? (await this.insertRows(handle, rows, options.ordered, writeErrors)))
          : ((await this.insertIfUnindexedRecorded(handle, rows, history)) ??
            (await this.insertRows(handle, rows, options.ordered, writeErrors, history)));
    if (handle.onWrite !== undefined) for (const row of rows) if (inserted.has(`${row.index}`)) handle.onWrite(row.shardKey, row.size);
    writeErrors.sort((a, b) => a.index - b.index);
    const insertedIndexes = rows.filter((r) => inserted.has(`${r.index}`)).map((r) => r.index);
    if (retried.length > 0) {
      insertedIndexes.push(...retried);
      insertedIndexes.sort((a, b) => a - b);
    }
    return { insertedCount: insertedIndexes.length, inserted: insertedIndexes, writeErrors };
  }

  /**
   * The common case in one round trip: a collection without secondary indexes, and no duplicate
   * key. A single statement inserts every row or none: it inserts nothing when the collection
   * has a secondary index (checked inside the statement, see below), and a duplicate `_id` or
   * unique shard key aborts it. Either way it answers undefined, and `insertRows` does the
   * batch again with MongoDB's per-document errors. Answers the indexes inserted otherwise.
   *
   * Why the check in the statement is as safe as `indexesForWrite`'s lock-then-read: Postgres
   * takes the INSERT's ROW EXCLUSIVE lock on the table while it parses the statement, before it
   * takes the snapshot the statement runs with. An index build holds SHARE ROW EXCLUSIVE from
   * before it reads the documents until it commits its catalog row, so either the build
   * committed first and this statement sees its row (and inserts nothing), or this statement
   * commits first and the build indexes its documents.
   */
  private async insertIfUnindexed(handle: CollectionHandle, rows: PreparedRow[]): Promise<Set<string> | undefined> {
    if ((handle.indexes !== undefined && handle.indexes.length > 0) || handle.transaction !== undefined) return undefined;
    let inserted: number;
    try {
      // Named: each connection parses and plans it once per table, then only binds and runs it.
      ({ rowCount: inserted } = await poolStatement(this.dataSource, {
        name: `insert_${handle.table}`,
        text: insertUnindexedSql(handle.table),
        values: [...rowParameters(rows, writeTimeOf(handle)), handle.table],
      }));
    } catch (error) {
      if (isUniqueViolation(error)) return undefined;
      throw error;
    }
    if (inserted !== rows.length) return undefined;
    return new Set(rows.map((r) => `${r.index}`));
  }

  /**
   * `insertIfUnindexed` for a retryable insert: the same rows and the documents' record in one
   * statement, which checks its own effects and raises unless every row was stored (a secondary
   * index, see above) and every session's record written; the raise rolls it back whole. On a
   * secondary index or a duplicate key `insertRows` does the batch again; a record that could
   * not be written is the history's to handle (its error goes up).
   */
  private async insertIfUnindexedRecorded(
    handle: CollectionHandle,
    rows: PreparedRow[],
    history: StatementHistory,
  ): Promise<Set<string> | undefined> {
    if (handle.indexes !== undefined && handle.indexes.length > 0) return undefined;
    const statements = recordedInserts(rows);
    const recording = history.recording(8, statements);
    try {
      // Named, as `insertIfUnindexed`, by the table and the recording's shape.
      await poolStatement(this.dataSource, {
        name: `insert_${recording.shape}_${handle.table}`,
        text: `WITH stored AS (${insertUnindexedSql(handle.table)} RETURNING 1), ${recording.ctes}
               SELECT txn_expect((SELECT count(*) FROM stored) = $7, '${ALL_STORED}') AND ${recording.check}`,
        values: [...rowParameters(rows, writeTimeOf(handle)), handle.table, rows.length, ...recording.values],
      });
    } catch (error) {
      if (isUniqueViolation(error) || (error instanceof Error && error.message.includes(ALL_STORED))) return undefined;
      throw error;
    }
    history.recorded(statements);
    return new Set(rows.map((r) => `${r.index}`));
  }

  /**
   * One statement for the batch. Rows go in request order, so of two documents with one `_id`
   * the first is kept. Returns the indexes inserted; adds a DUPLICATE_KEY error for each other.
   * With a `history`, records the documents that stay inserted, in the same transaction.
   */
  private async insertRows(
    handle: CollectionHandle,
    prepared: PreparedRow[],
    ordered: boolean,
    writeErrors: WriteError[],
    history?: StatementHistory,
  ): Promise<Set<string>> {
    // Undoing a row stored by this statement deletes it, which the history trigger sees.
    return inWriteTransaction(this.dataSource, handle, async (manager) => {
      const indexes = await indexesForWrite(manager, handle);
      const entries = new Map<PreparedRow, DocumentEntries>();
      const rows = this.withIndexEntries(indexes, prepared, entries, ordered, writeErrors);
      if (rows.length === 0) return new Set<string>();
      const batch: InsertBatch = { manager, handle, indexes, rows, entries, writeErrors };
      const { inserted, failed } = claimInserted(rows, await this.insertStatement(batch));
      await this.reportDuplicates(batch, failed);
      const refused = await this.addIndexEntries(batch, inserted);
      if (ordered) await this.undoAfterFirstFailure(batch, inserted, [...failed, ...refused]);
      await history?.record(manager, recordedInserts(rows.filter((r) => inserted.has(`${r.index}`))));
      if (handle.transaction !== undefined)
        for (const r of rows) if (inserted.has(`${r.index}`)) handle.transaction.wrote(handle, r.id, r.shardKey);
      return inserted;
    });
  }

  /** Runs the batch's INSERT, skipping rows whose `_id` or shard key conflicts; answers the `_id`s (hex) it stored. */
  private async insertStatement({ manager, handle, rows }: InsertBatch): Promise<Set<string>> {
    const returned: Array<{ id: Buffer }> = await manager.query(
      `INSERT INTO ${handle.table} (id, shard_key, doc, size, valid_from)
       SELECT id, shard_key, doc, size, $5::int8 FROM ${ROWS_FROM}
       ORDER BY n
       ON CONFLICT DO NOTHING RETURNING id`,
      rowParameters(rows, writeTimeOf(handle)),
    );
    return new Set(returned.map((r) => r.id.toString('hex')));
  }

  /** Adds a DUPLICATE_KEY write error for each failed row, saying whether its `_id` or its shard key was taken. */
  private async reportDuplicates({ manager, handle, writeErrors }: InsertBatch, failed: PreparedRow[]): Promise<void> {
    const takenIds = await this.existingIds(manager, handle, failed);
    for (const row of failed)
      writeErrors.push({ index: row.index, error: duplicateKey(handle.ns, handle.pattern, row, takenIds.has(row.id.toString('hex'))) });
  }

  /**
   * Adds the secondary index entries of the rows stored. A document refused by a unique secondary
   * index is taken out again, whole: its row deleted, its index dropped from `inserted` and its
   * error added. Answers the refused rows.
   */
  private async addIndexEntries(
    { manager, handle, indexes, rows, entries, writeErrors }: InsertBatch,
    inserted: Set<string>,
  ): Promise<PreparedRow[]> {
    const stored = rows.filter((r) => inserted.has(`${r.index}`));
    const conflicts = await addEntries(
      manager,
      handle.ns,
      indexes,
      stored.map((r) => entries.get(r)!),
    );
    const refused = [...conflicts.keys()].map((position) => stored[position]!);
    if (refused.length > 0) await manager.query(`DELETE FROM ${handle.table} WHERE id = ANY($1::bytea[])`, [refused.map((r) => r.id)]);
    for (const [position, error] of conflicts) {
      inserted.delete(`${stored[position]!.index}`);
      writeErrors.push({ index: stored[position]!.index, error: withStatement(error, stored[position]!.index) });
    }
    return refused;
  }

  /**
   * Ordered: nothing after the first failure may stay. Deletes the rows of this statement stored
   * after it, with their index entries, drops them from `inserted`, and keeps only the write
   * errors up to the first failure.
   */
  private async undoAfterFirstFailure(
    { manager, handle, indexes, rows, entries, writeErrors }: InsertBatch,
    inserted: Set<string>,
    failures: readonly PreparedRow[],
  ): Promise<void> {
    const firstFailure = failures.reduce<number | undefined>((min, r) => (min === undefined ? r.index : Math.min(min, r.index)), undefined);
    if (firstFailure === undefined) return;
    const undo = rows.filter((r) => r.index > firstFailure && inserted.has(`${r.index}`));
    if (undo.length > 0) await manager.query(`DELETE FROM ${handle.table} WHERE id = ANY($1::bytea[])`, [undo.map((r) => r.id)]);
    await removeEntries(
      manager,
      indexes,
      undo.map((r) => entries.get(r)!),
    );
    for (const r of undo) inserted.delete(`${r.index}`);
    writeErrors.splice(0, writeErrors.length, ...writeErrors.filter((e) => e.index <= firstFailure));
  }

  /**
   * Each row's index entries. A document that cannot be indexed (parallel arrays, an array in a
   * hashed field) is a write error of its own, like an invalid document; ordered stops there.
   */
  private withIndexEntries(
    indexes: readonly SecondaryIndex[],
    rows: PreparedRow[],
    entries: Map<PreparedRow, DocumentEntries>,
    ordered: boolean,
    writeErrors: WriteError[],
  ): PreparedRow[] {
    const kept: PreparedRow[] = [];
    for (const row of rows) {
      try {
        entries.set(row, entriesOf(indexes, row.id, row.document()));
        kept.push(row);
      } catch (error) {
        writeErrors.push({ index: row.index, error: toEnvelope(error) });
        if (ordered) break;
      }
    }
    return kept;
  }

  /** Which of the failed rows' `_id`s are taken (by a stored document or an earlier one of the batch). */
  private async existingIds(manager: EntityManager, handle: CollectionHandle, failed: PreparedRow[]): Promise<Set<string>> {
    if (failed.length === 0) return new Set();
    const rows: Array<{ id: Buffer }> = await manager.query(`SELECT id FROM ${handle.table} WHERE id = ANY($1::bytea[])`, [
      failed.map((r) => r.id),
    ]);
    return new Set(rows.map((r) => r.id.toString('hex')));
  }
}

/** One insert statement's batch, as the steps of `insertRows` share it inside its transaction. */
interface InsertBatch {
  manager: EntityManager;
  handle: CollectionHandle;
  indexes: readonly SecondaryIndex[];
  /** The rows of the statement, in request order, each with its index entries in `entries`. */
  rows: PreparedRow[];
  entries: Map<PreparedRow, DocumentEntries>;
  writeErrors: WriteError[];
}

/**
 * Which rows the statement stored: of rows sharing an `_id`, only the first (in request order)
 * claims the stored one. Answers their indexes (as strings) and the rows that failed.
 */
function claimInserted(rows: readonly PreparedRow[], insertedIds: ReadonlySet<string>): { inserted: Set<string>; failed: PreparedRow[] } {
  const inserted = new Set<string>();
  const claimed = new Set<string>();
  const failed: PreparedRow[] = [];
  for (const row of rows) {
    const hex = row.id.toString('hex');
    if (insertedIds.has(hex) && !claimed.has(hex)) {
      claimed.add(hex);
      inserted.add(`${row.index}`);
    } else {
      failed.push(row);
    }
  }
  return { inserted, failed };
}
