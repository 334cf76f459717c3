import { randomBytes } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { type Collation, TesseraError, type ValueObject, fromExtendedJsonObject, toExtendedJsonObject } from '@tessera/core';
import { type TimeLimit, poolQuery, poolStatement } from '@tessera/platform';
import {
  type CompiledFilter,
  MAX_BATCH_BYTES,
  type PipelineOptions,
  bsonSize,
  compileProjection,
  projectionOptions,
  compileSort,
  runPipeline,
} from '@tessera/query';
import { planSqlGroup } from './sql-group.js';
import { compileScanFilter, readRelation, scanConditions } from './document-scan.js';
import type { CollectionHandle } from './document-store.js';

export interface FindRequest {
  /** Filter, sort and projection as core values (already parsed from Extended JSON). */
  filter?: ValueObject;
  sort?: ValueObject;
  projection?: ValueObject;
  skip?: number;
  limit?: number;
  batchSize?: number;
  /** How strings compare in the filter and the sort (byte order without one). */
  collation?: Collation;
  /** The command's `let`, which the filter's `$expr` reads as `$$name`. */
  variables?: ValueObject;
  /** The command's maxTimeMS: its first batch's statements run under it, later batches do not. */
  timeLimit?: TimeLimit;
}

/** A batch of documents (Extended JSON) and the cursor to ask for more, null when exhausted. */
export interface FindBatch {
  cursorId: string | null;
  documents: unknown[];
}

/** MongoDB's first batch: 101 documents unless asked otherwise. */
export const DEFAULT_BATCH_SIZE = 101;
/** Rows read from Postgres per round trip while streaming. */
const PAGE_ROWS = 1_000;
/** MongoDB's cursorTimeoutMillis: an idle cursor is closed after 10 minutes. */
export const CURSOR_IDLE_TIMEOUT_MS = 600_000;

interface Cursor {
  /** Up to `count` documents, of `maxBatchBytes` at most unless there is only one. */
  next(count: number): Promise<{ documents: unknown[]; exhausted: boolean }>;
  lastUsed: number;
  /** Called once when the cursor ends: exhausted, killed or reaped. */
  close?: () => void;
}

/**
 * Runs finds over one collection's table and keeps their cursors for getMore. The shard key
 * ranges a filter can match (and an `_id` equality) become SQL conditions on the btree-indexed
 * columns; the filter itself, the ownership view taken when the query started (orphans are
 * never returned) and the projection are applied to each row. Without a sort, a cursor streams
 * the table in `_id` order, a page at a time; with a sort, the matching documents are sorted in
 * memory first. A batch ends at `batchSize` documents, or before the document that would take
 * it past `maxBatchBytes` (16 MiB, as MongoDB's, in BSON bytes: the documents' sizes as stored,
 * or as projected), whichever comes first; it always holds one document when any is left.
 */
export class CursorManager {
  private readonly cursors = new Map<string, Cursor>();

  constructor(
    private readonly dataSource: DataSource,
    private readonly now: () => number = Date.now,
    private readonly maxBatchBytes = MAX_BATCH_BYTES,
  ) {}

  /**
   * Starts a query; answers the first batch and, if more remain, a cursor id. `onClose` runs
   * once when the query is over (at once if the first batch is the last, else when its cursor is
   * exhausted, killed or reaped): the query holds its ownership view until then.
   */
  async find(handle: CollectionHandle, request: FindRequest, onClose?: () => void): Promise<FindBatch> {
    const filter = request.filter ?? {};
    const compiled = compileScanFilter(filter, request.collation, request.variables);
    const sort =
      request.sort === undefined || Object.keys(request.sort).length === 0 ? undefined : compileSort(request.sort, request.collation);
    const project = compileProjection(request.projection, projectionOptions(filter, request.collation, request.variables));
    const skip = nonNegative(request.skip, 'skip') ?? 0;
    const limit = nonNegative(request.limit, 'limit') || undefined;
    const where = scanConditions(handle, compiled.filter);
    const accept = ownedMatching(handle, compiled);
    // A batch is sized by its documents as stored, or as projected when projected.
    const sizeOf: SizeOf =
      request.projection === undefined || Object.keys(request.projection).length === 0 ? (_projected, stored) => stored : bsonSize;
    // A transaction's statement reads on the transaction's connection, all at once: its later
    // batches are served after the statement (or the transaction) is over.
    const cursor =
      sort || handle.transaction
        ? await this.sortedCursor(handle, where, accept, sort, skip, limit, project, sizeOf, request.timeLimit)
        : this.streamingCursor(handle, where, accept, skip, limit, project, sizeOf, request.timeLimit);
    if (onClose !== undefined) cursor.close = onClose;
    return this.batchFrom(cursor, undefined, nonNegative(request.batchSize, 'batchSize') || DEFAULT_BATCH_SIZE);
  }

  /** The next batch of an open cursor; `CURSOR_NOT_FOUND` if it is unknown, exhausted or expired. */
  async getMore(cursorId: string, batchSize?: number): Promise<FindBatch> {
    const cursor = this.cursors.get(cursorId);
    if (cursor === undefined)
      throw new TesseraError('CURSOR_NOT_FOUND', `cursor id ${cursorId} not found: it was exhausted, killed or timed out`, {
        details: { cursorId },
      });
    return this.batchFrom(cursor, cursorId, nonNegative(batchSize, 'batchSize') || DEFAULT_BATCH_SIZE);
  }

  /** Closes cursors; answers which were open. */
  kill(cursorIds: readonly string[]): { killed: string[]; notFound: string[] } {
    const killed = cursorIds.filter((id) => this.close(id));
    return { killed, notFound: cursorIds.filter((id) => !killed.includes(id)) };
  }

  /** Closes cursors idle for longer than the timeout; returns how many. */
  reapIdle(timeoutMs = CURSOR_IDLE_TIMEOUT_MS): number {
    const cutoff = this.now() - timeoutMs;
    let reaped = 0;
    for (const [id, cursor] of this.cursors) {
      if (cursor.lastUsed < cutoff) {
        this.close(id);
        reaped++;
      }
    }
    return reaped;
  }

  get openCursors(): number {
    return this.cursors.size;
  }

  private close(cursorId: string): boolean {
    const cursor = this.cursors.get(cursorId);
    if (cursor === undefined) return false;
    this.cursors.delete(cursorId);
    cursor.close?.();
    return true;
  }

  private async batchFrom(cursor: Cursor, cursorId: string | undefined, batchSize: number): Promise<FindBatch> {
    let batch: { documents: unknown[]; exhausted: boolean };
    try {
      batch = await cursor.next(batchSize);
    } catch (error) {
      if (cursorId !== undefined) this.close(cursorId);
      throw error;
    }
    const { documents, exhausted } = batch;
    cursor.lastUsed = this.now();
    if (exhausted) {
      if (cursorId !== undefined) this.cursors.delete(cursorId);
      cursor.close?.();
      return { cursorId: null, documents };
    }
    const id = cursorId ?? BigInt.asUintN(63, randomBytes(8).readBigUInt64BE()).toString();
    this.cursors.set(id, cursor);
    return { cursorId: id, documents };
  }

  /** A cursor without a sort: the table in `_id` order, a page at a time. */
  private streamingCursor(
    handle: CollectionHandle,
    where: ScanConditions,
    accept: (row: StoredRow) => ValueObject | undefined,
    skip: number,
    limit: number | undefined,
    project: (document: ValueObject) => ValueObject,
    sizeOf: SizeOf,
    firstBatchLimit: TimeLimit | undefined,
  ): Cursor {
    const stream: StreamPosition = { after: null, toSkip: skip, remaining: limit ?? Infinity, done: false };
    const { dataSource, maxBatchBytes } = this;
    const returning: RowsToBatch = { accept, project, sizeOf, maxBatchBytes };
    let timeLimit = firstBatchLimit;
    return {
      lastUsed: this.now(),
      async next(count) {
        const batch: BatchInProgress = { documents: [], bytes: 0, full: false };
        while (!stream.done && !batch.full && batch.documents.length < count && stream.remaining > 0) {
          const rows = await readPage(dataSource, handle, where, stream.after, maxBatchBytes, timeLimit);
          const taken = takeRows(rows, stream, batch, count, returning);
          stream.done = isLastPage(rows, taken);
        }
        timeLimit = undefined;
        return { documents: batch.documents, exhausted: stream.done || stream.remaining <= 0 };
      },
    };
  }

  /**
   * Starts an aggregation's shard part: the owned documents matching `request.filter`, read all at
   * once in the query's ownership view, run through `stages` (the shards part of the pipeline),
   * and served in batches like a find's. A leading `$group` Postgres can compute exactly
   * (`planSqlGroup`) runs there, and only its groups come back.
   */
  async aggregate(
    handle: CollectionHandle,
    request: { filter: ValueObject; batchSize?: number | undefined; timeLimit?: TimeLimit | undefined },
    stages: readonly ValueObject[],
    options: PipelineOptions,
    onClose?: () => void,
  ): Promise<FindBatch> {
    const compiled = compileScanFilter(request.filter, options.collation, options.variables);
    // Postgres groups strings by bytes: under a collation the pipeline groups.
    const grouped =
      options.collation === undefined ? await this.groupInPostgres(handle, compiled.filter, stages[0], request.timeLimit) : undefined;
    const input =
      grouped ??
      (
        await this.matchingDocuments(handle, scanConditions(handle, compiled.filter), ownedMatching(handle, compiled), request.timeLimit)
      ).map(({ document }) => document);
    const results = runPipeline(input, grouped === undefined ? stages : stages.slice(1), options).map((document) => ({
      document,
      size: bsonSize(document),
    }));
    const cursor = this.resultsCursor(
      results,
      (document) => document,
      (_document, size) => size,
    );
    if (onClose !== undefined) cursor.close = onClose;
    return this.batchFrom(cursor, undefined, nonNegative(request.batchSize, 'batchSize') || DEFAULT_BATCH_SIZE);
  }

  /** The groups of a leading `$group` as Postgres computes them; undefined when it cannot give MongoDB's answer. */
  private async groupInPostgres(
    handle: CollectionHandle,
    filter: ValueObject,
    first: ValueObject | undefined,
    timeLimit: TimeLimit | undefined,
  ): Promise<ValueObject[] | undefined> {
    if (first === undefined || !('$group' in first) || handle.snapshot !== undefined || handle.transaction !== undefined) return undefined;
    const owned = handle.ownedRanges?.();
    if (owned === undefined) return undefined;
    // Its own conditions, without the scan's narrowing by equalities: the plan tests those exactly.
    const plan = planSqlGroup(readRelation(handle), scanConditions(handle, filter, false), filter, first['$group']!, handle.pattern, owned);
    if (plan === undefined) return undefined;
    return plan.documents(await poolQuery<Record<string, unknown>>(this.dataSource, plan.sql, plan.params, timeLimit));
  }

  private async sortedCursor(
    handle: CollectionHandle,
    where: { sql: string; params: unknown[] },
    accept: (row: StoredRow) => ValueObject | undefined,
    sort: ((a: ValueObject, b: ValueObject) => number) | undefined,
    skip: number,
    limit: number | undefined,
    project: (document: ValueObject) => ValueObject,
    sizeOf: SizeOf,
    timeLimit: TimeLimit | undefined,
  ): Promise<Cursor> {
    const matching = await this.matchingDocuments(handle, where, accept, timeLimit);
    if (sort !== undefined) matching.sort((a, b) => sort(a.document, b.document));
    return this.resultsCursor(matching.slice(skip, limit === undefined ? undefined : skip + limit), project, sizeOf);
  }

  /** Every row matching `where` that `accept` keeps, read at once (on the transaction's connection inside one). */
  private async matchingDocuments(
    handle: CollectionHandle,
    where: { sql: string; params: unknown[] },
    accept: (row: StoredRow) => ValueObject | undefined,
    timeLimit: TimeLimit | undefined,
  ): Promise<Array<{ document: ValueObject; size: number }>> {
    const text = `SELECT shard_key, doc, size FROM ${readRelation(handle)} WHERE ${where.sql}`;
    const rows: StoredRow[] =
      handle.transaction === undefined
        ? await poolQuery<StoredRow>(this.dataSource, text, where.params, timeLimit)
        : await handle.transaction.manager.query(`${text} ORDER BY id`, where.params);
    return rows.flatMap((row) => {
      const document = accept(row);
      return document === undefined ? [] : [{ document, size: row.size }];
    });
  }

  /** A cursor over results held in memory, batched by count and bytes. */
  private resultsCursor(
    results: ReadonlyArray<{ document: ValueObject; size: number }>,
    project: (document: ValueObject) => ValueObject,
    sizeOf: SizeOf,
  ): Cursor {
    const { maxBatchBytes } = this;
    let position = 0;
    return {
      lastUsed: this.now(),
      async next(count) {
        const documents: unknown[] = [];
        let bytes = 0;
        for (; position < results.length && documents.length < count; position++) {
          const { document, size: stored } = results[position]!;
          const projected = project(document);
          const size = sizeOf(projected, stored);
          if (documents.length > 0 && bytes + size > maxBatchBytes) break;
          documents.push(toExtendedJsonObject(projected));
          bytes += size;
        }
        return { documents, exhausted: position >= results.length };
      },
    };
  }
}

/** A row's document when this shard owns it and it matches `compiled`; undefined for an orphan or a miss. */
function ownedMatching(handle: CollectionHandle, compiled: CompiledFilter): (row: StoredRow) => ValueObject | undefined {
  return (row) => {
    if (!handle.owns(row.shard_key)) return undefined;
    const document = fromExtendedJsonObject(row.doc) as ValueObject;
    return compiled.matches(document) ? document : undefined;
  };
}

/** The BSON size of a document returned, from the document as returned or its size as stored. */
type SizeOf = (projected: ValueObject, stored: number) => number;

/** A document's row as a find reads it: its encoded shard key, the document and its BSON size. */
interface StoredRow {
  shard_key: Buffer;
  doc: unknown;
  size: number;
}

/** The SQL conditions of a scan (`scanConditions`), `pointQuery` when they are one shard key equality. */
type ScanConditions = ReturnType<typeof scanConditions>;

/** A page's row: a stored row with its `id`, and how many rows the page held before the cut at a batch's bytes. */
type PageRow = StoredRow & { id: Buffer; page_rows: string };

/** Where a streaming cursor is in the table, kept from one batch to the next. */
interface StreamPosition {
  /** The `id` of the last row taken; null before the first. The next page starts after it. */
  after: Buffer | null;
  /** Matching documents still to skip. */
  toSkip: number;
  /** Documents still to return under the limit. */
  remaining: number;
  /** True once the last page was read and taken to its end. */
  done: boolean;
}

/** The batch a `next` call is filling. */
interface BatchInProgress {
  documents: unknown[];
  bytes: number;
  /** True once the next document would take the batch past its bytes. */
  full: boolean;
}

/** What turns a row into a returned document, and the most bytes a batch holds. */
interface RowsToBatch {
  accept: (row: StoredRow) => ValueObject | undefined;
  project: (document: ValueObject) => ValueObject;
  sizeOf: SizeOf;
  maxBatchBytes: number;
}

/**
 * Reads the next page of the table's rows matching `where`, in `id` order after `after` (from the
 * start when null): at most `PAGE_ROWS` rows, and none past the row that reaches `maxBatchBytes`.
 */
async function readPage(
  dataSource: DataSource,
  handle: CollectionHandle,
  where: ScanConditions,
  after: Buffer | null,
  maxBatchBytes: number,
  timeLimit: TimeLimit | undefined,
): Promise<PageRow[]> {
  // The first page has no lower bound on `id`: an `id > ''` condition would make Postgres
  // read the whole primary key index alongside a narrow shard key range.
  const params = after === null ? where.params : [...where.params, after];
  const resume = after === null ? '' : ` AND id > $${params.length}`;
  // A point query's first page is a named statement, parsed and planned once per connection.
  // Its LIMIT is written out: with a parameter there, the plan made for any key assumes a
  // limit of a tenth of the table and can walk the whole primary key in `id` order.
  // A page ends too after the row that reaches a batch's bytes, so that large documents
  // past it are not read (nor their TOASTed text fetched) only to be read again.
  const { rows } = await poolStatement<PageRow>(
    dataSource,
    {
      ...(where.pointQuery && after === null && handle.snapshot === undefined ? { name: `find_${handle.table}` } : {}),
      text:
        `SELECT id, shard_key, doc, size, page_rows FROM (` +
        `SELECT *, sum(size) OVER (ORDER BY id ROWS UNBOUNDED PRECEDING) - size AS before, count(*) OVER () AS page_rows FROM (` +
        `SELECT id, shard_key, doc, size FROM ${readRelation(handle)} WHERE ${where.sql}${resume} ORDER BY id LIMIT ${PAGE_ROWS}` +
        `) AS page) AS sized WHERE before < ${maxBatchBytes} ORDER BY id`,
      values: params,
    },
    timeLimit,
  );
  return rows;
}

/**
 * Takes a page's rows in order into `batch`: a row that is an orphan or does not match is passed
 * over, a matching one is skipped while `stream.toSkip` lasts, and the rest are projected and
 * returned. Stops before the document that would take a non-empty batch past its bytes (leaving
 * `batch.full`), or after the one that fills `count` or the limit. Leaves `stream.after` at the
 * last row taken and answers how many were taken; rows after it are read again by the next page.
 */
function takeRows(rows: readonly PageRow[], stream: StreamPosition, batch: BatchInProgress, count: number, to: RowsToBatch): number {
  let taken = 0;
  for (const row of rows) {
    const document = to.accept(row);
    const returned = document !== undefined && stream.toSkip === 0;
    const projected = returned ? to.project(document) : undefined;
    const size = projected === undefined ? 0 : to.sizeOf(projected, row.size);
    if (returned && batch.documents.length > 0 && batch.bytes + size > to.maxBatchBytes) {
      batch.full = true;
      break;
    }
    stream.after = row.id;
    taken++;
    if (projected === undefined) {
      if (document !== undefined) stream.toSkip--;
      continue;
    }
    batch.documents.push(toExtendedJsonObject(projected));
    batch.bytes += size;
    stream.remaining--;
    if (batch.documents.length >= count || stream.remaining <= 0) break;
  }
  return taken;
}

/** Whether the page was the table's last and every row of it was taken. */
function isLastPage(rows: readonly PageRow[], taken: number): boolean {
  const pageRows = rows.length === 0 ? 0 : Number(rows[0]!.page_rows);
  return pageRows < PAGE_ROWS && rows.length === pageRows && taken === rows.length;
}

function nonNegative(value: number | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  if (!Number.isSafeInteger(value) || value < 0)
    throw new TesseraError('BAD_VALUE', `${name} must be a non-negative integer, got ${value}`, { details: { field: name } });
  return value;
}
