import type { Queryable, TimeLimit } from '@tessera/platform';
import {
  type ChunkRange,
  type Collation,
  TesseraError,
  type Value,
  type ValueObject,
  encodeKey,
  fromExtendedJsonObject,
} from '@tessera/core';
import { type CompiledFilter, idEqualityFromFilter, isDocument, keyOfPointRange, keyRangesForFilter, parseFilter } from '@tessera/query';
import type { CollectionHandle } from './document-store.js';
import { indexRangesForFilter } from './index-keys.js';

/** A stored document as read back: its encoded `_id`, encoded shard key and value. */
export interface StoredDocument {
  id: Buffer;
  shardKey: Buffer;
  document: ValueObject;
}

/**
 * SQL conditions that narrow a scan to what a filter can match: the shard key ranges it implies
 * (btree on `shard_key`; a single key is an equality, since stored keys have the pattern's
 * arity), an `_id` equality (primary key) and, when the handle lists secondary indexes, the key
 * ranges of one of them (a semi-join on its side table), and a test of the stored document's
 * field for each top-level string or boolean equality (`equalFields`) unless `narrowEqualities`
 * is false. Parameters start at $1. `pointQuery`
 * says the conditions are that one shard key equality and nothing else: the point query, whose
 * statement text is the same for every key. `filter` is best the normalised one of a
 * `CompiledFilter`, which is not validated again.
 */
export function scanConditions(
  handle: CollectionHandle,
  filter: ValueObject,
  narrowEqualities = true,
): { sql: string; params: unknown[]; pointQuery: boolean } {
  const params: unknown[] = [];
  const parts: string[] = [];
  const id = idEqualityFromFilter(filter);
  if (id !== undefined) {
    params.push(Buffer.from(encodeKey([id])));
    parts.push(`id = $${params.length}`);
  }
  const ranges: ChunkRange[] = keyRangesForFilter(handle.pattern, filter);
  if (ranges.length === 0) return { sql: 'false', params, pointQuery: false };
  const point = ranges.length === 1 ? keyOfPointRange(handle.pattern, ranges[0]!) : undefined;
  if (point !== undefined) {
    params.push(Buffer.from(encodeKey(point)));
    parts.push(`shard_key = $${params.length}`);
  } else {
    const rangeSql = ranges.map((range) => {
      params.push(Buffer.from(encodeKey(range.min)), Buffer.from(encodeKey(range.max)));
      return `(shard_key >= $${params.length - 1} AND shard_key < $${params.length})`;
    });
    parts.push(`(${rangeSql.join(' OR ')})`);
  }
  // `_id` and shard key fields are narrowed by their btrees already (and a point query keeps its
  // one prepared statement).
  const keyed = new Set(['_id', ...handle.pattern.fields.map((f) => f.path)]);
  for (const { field, values } of narrowEqualities ? equalFields(filter).filter((e) => !keyed.has(e.field)) : []) {
    params.push(field, values);
    const [name, texts] = [`$${params.length - 1}`, `$${params.length}`];
    parts.push(`(doc->>${name}::text = ANY(${texts}::text[]) OR json_typeof(doc->${name}::text) = 'array')`);
  }
  const index = bestIndex(handle, filter);
  if (index !== undefined) {
    const keySql = index.ranges.map((range) => {
      params.push(Buffer.from(encodeKey(range.min)), Buffer.from(encodeKey(range.max)));
      return `(key >= $${params.length - 1} AND key < $${params.length})`;
    });
    parts.push(`id IN (SELECT id FROM ${index.table} WHERE ${keySql.length === 0 ? 'false' : keySql.join(' OR ')})`);
  }
  return { sql: parts.join(' AND '), params, pointQuery: point !== undefined && parts.length === 1 };
}

/**
 * For each top-level field the filter (or a top-level `$and`) compares by equality, or `$in`,
 * with strings or booleans only: the texts one of which the stored field must read as, unless it
 * is an array (whose elements the filter then checks). Strings and booleans have one stored
 * form in Extended JSON; numbers do not (a Decimal128 1 is stored wrapped), so they are left
 * out. The filter still checks every row; this only keeps rows that cannot match in Postgres.
 * Under a collation other than simple, equal strings may differ, and this must not be used.
 */
function equalFields(filter: ValueObject): Array<{ field: string; values: string[] }> {
  const conditions: Array<{ field: string; values: string[] }> = [];
  for (const [field, condition] of Object.entries(filter)) {
    if (field === '$and' && Array.isArray(condition)) {
      for (const part of condition as ValueObject[]) conditions.push(...equalFields(part));
      continue;
    }
    if (field.startsWith('$') || field.includes('.')) continue;
    const values = stringOrBooleanEquality(condition);
    if (values !== undefined) conditions.push({ field, values: values.map(String) });
  }
  return conditions;
}

/**
 * The values a field's condition asks it to equal, when it is a string or boolean, `$eq` of one,
 * or `$in` of them only; undefined for any other condition.
 */
export function stringOrBooleanEquality(condition: Value | undefined): Array<string | boolean> | undefined {
  const scalar = (value: unknown): value is string | boolean => typeof value === 'string' || typeof value === 'boolean';
  if (scalar(condition)) return [condition];
  if (!isDocument(condition) || Object.keys(condition).length !== 1) return undefined;
  if (scalar(condition['$eq'])) return [condition['$eq']];
  const among = condition['$in'];
  return Array.isArray(among) && among.length > 0 && among.every(scalar) ? among : undefined;
}

/**
 * The secondary index whose key ranges narrow the scan, the one with the fewest ranges; none
 * when no index's first field is constrained. The ranges are a superset (see
 * `indexRangesForFilter`) and the filter re-checks every row, so results stay exact.
 */
function bestIndex(handle: CollectionHandle, filter: ValueObject): { table: string; ranges: ChunkRange[] } | undefined {
  let best: { table: string; ranges: ChunkRange[] } | undefined;
  for (const index of handle.indexes ?? []) {
    const ranges = indexRangesForFilter(index.pattern, filter);
    if (ranges !== undefined && (best === undefined || ranges.length < best.ranges.length)) best = { table: index.table, ranges };
  }
  return best;
}

/**
 * What a read selects `id, shard_key, doc, size` from: the collection's table, or for a read at
 * a past time (`handle.snapshot`) the versions visible then: rows stored at or before it, and
 * kept versions that were replaced or deleted after it (valid_from <= T < valid_to). Conditions
 * on `id` and `shard_key` reach into both halves of the union.
 */
export function readRelation(handle: CollectionHandle): string {
  if (handle.snapshot === undefined) return handle.table;
  const { collectionUuid, time } = handle.snapshot;
  // Both are written into the text: the time is an integer we made, the uuid one of our catalog's.
  if (!/^-?\d+$/.test(time) || !/^[0-9a-f-]{36}$/i.test(collectionUuid)) throw new Error(`not a snapshot: ${time} ${collectionUuid}`);
  return (
    `(SELECT id, shard_key, doc, size FROM ${handle.table} WHERE valid_from <= ${time} ` +
    `UNION ALL SELECT id, shard_key, doc, size FROM document_history ` +
    `WHERE collection_uuid = '${collectionUuid}' AND valid_from <= ${time} AND valid_to > ${time}) AS versions`
  );
}

/** How a read compares strings (byte order without a collation) and how long it may run. */
export interface ReadOptions {
  readonly collation?: Collation;
  readonly timeLimit?: TimeLimit;
}

/**
 * `filter` compiled under `collation`, its `$expr` reading `variables` (`let`). Its `filter`, which the scan turns into SQL conditions
 * (shard key ranges, index ranges, equalities), compares strings by bytes; under a collation the
 * scan is given none, reads every owned row and leaves matching to `matches`.
 */
export function compileScanFilter(filter: unknown, collation: Collation | undefined, variables?: ValueObject): CompiledFilter {
  const compiled = parseFilter(filter, collation, variables);
  return collation === undefined ? compiled : { filter: {}, matches: compiled.matches };
}

/**
 * The owned documents matching `compiled`, in `_id` order, locked for update when asked (the
 * caller's transaction then owns them until it ends). Stops after `limit` matches. A statement
 * of a cross-shard transaction reads at the transaction's snapshot and locks what it will write
 * afterwards (`lockForTransaction`).
 */
export async function scanMatching(
  manager: Queryable,
  handle: CollectionHandle,
  compiled: CompiledFilter,
  options: { forUpdate?: boolean; limit?: number } = {},
): Promise<StoredDocument[]> {
  const where = scanConditions(handle, compiled.filter);
  const lockInScan = options.forUpdate === true && handle.transaction === undefined;
  const rows = (await manager.query(
    `SELECT id, shard_key, doc FROM ${readRelation(handle)} WHERE ${where.sql} ORDER BY id${lockInScan ? ' FOR UPDATE' : ''}`,
    where.params,
  )) as Array<{ id: Buffer; shard_key: Buffer; doc: unknown }>;
  const matches: StoredDocument[] = [];
  for (const row of rows) {
    if (!handle.owns(row.shard_key)) continue;
    const document = fromExtendedJsonObject(row.doc) as ValueObject;
    if (!compiled.matches(document)) continue;
    matches.push({ id: row.id, shardKey: row.shard_key, document });
    if (options.limit !== undefined && matches.length >= options.limit) break;
  }
  if (options.forUpdate === true && handle.transaction !== undefined) await lockForTransaction(manager, handle, matches);
  return matches;
}

/** Postgres' lock_not_available: a NOWAIT lock another transaction holds. */
const LOCK_NOT_AVAILABLE = '55P03';

/**
 * Snapshot isolation's first-committer-wins, for the documents a transaction's statement read at
 * its snapshot and will write: each is locked without waiting, and it is a write conflict when
 * another transaction holds it, or changed or deleted it after the snapshot (its stored version
 * is newer than the snapshot and not this transaction's own). Not waiting is MongoDB's rule too:
 * a transaction never queues behind another's document, so no wait cycle can form across shards.
 */
async function lockForTransaction(manager: Queryable, handle: CollectionHandle, matches: readonly StoredDocument[]): Promise<void> {
  if (matches.length === 0) return;
  let rows: Array<{ id: Buffer; newer: boolean }>;
  try {
    rows = (await manager.query(
      `SELECT id, valid_from > $2::int8 AND xmin <> pg_current_xact_id()::xid AS newer
       FROM ${handle.table} WHERE id = ANY($1::bytea[]) FOR UPDATE NOWAIT`,
      [matches.map((m) => m.id), handle.snapshot!.time],
    )) as Array<{ id: Buffer; newer: boolean }>;
  } catch (error) {
    if ((error as { code?: string }).code === LOCK_NOT_AVAILABLE) throw writeConflict(handle, 'another transaction is writing it');
    throw error;
  }
  const current = new Map(rows.map((r) => [r.id.toString('hex'), r.newer]));
  for (const match of matches) {
    const newer = current.get(match.id.toString('hex'));
    if (newer === undefined) throw writeConflict(handle, "it was deleted after this transaction's snapshot");
    if (newer) throw writeConflict(handle, "it changed after this transaction's snapshot");
  }
}

function writeConflict(handle: CollectionHandle, why: string): TesseraError {
  return new TesseraError('WRITE_CONFLICT', `write conflict on a document of ${handle.ns}: ${why}`, { details: { namespace: handle.ns } });
}
