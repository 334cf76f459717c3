import type { EntityManager } from 'typeorm';
import {
  type ShardKeyPattern,
  TesseraError,
  type Value,
  type ValueObject,
  fromExtendedJsonObject,
  parseShardKeyPattern,
  toExtendedJsonObject,
} from '@tessera/core';
import type { CollectionHandle } from './document-store.js';
import { type IndexEntry, indexEntriesOf } from './index-keys.js';

/**
 * Secondary index maintenance, the way a storage engine keeps its indexes: every write adds and
 * removes a document's entries in the side tables inside the write's own transaction, so an
 * index is never behind its collection, and a unique violation rolls the statement back.
 *
 * Locking: `indexesForWrite` takes the collection table's ROW EXCLUSIVE lock before it reads the
 * index catalog. createIndexes and dropIndexes hold SHARE ROW EXCLUSIVE on the table, which
 * conflicts with it, so a write either sees an index that a build has committed or has
 * committed before the build reads the documents. The one-statement insert into a collection
 * without secondary indexes (`DocumentStore`) gets the same guarantee from its INSERT's own lock
 * and checks the catalog inside that statement instead.
 */

/** One secondary index as the shard stores it. */
export interface SecondaryIndex {
  name: string;
  keyPattern: Record<string, 1 | 'hashed'>;
  pattern: ShardKeyPattern;
  unique: boolean;
  /** The side table `x_<collection uuid hex>_<suffix>`. */
  table: string;
}

/** A document's entries, one list per index (in the order of the indexes given). */
export interface DocumentEntries {
  id: Buffer;
  perIndex: IndexEntry[][];
}

const loaded = new WeakMap<EntityManager, Map<string, Promise<SecondaryIndex[]>>>();

/** The secondary indexes of a collection, by its table name, without locking (readers). */
export async function loadIndexes(manager: EntityManager, collectionTable: string): Promise<SecondaryIndex[]> {
  const rows: Array<{ name: string; key_pattern: Record<string, 1 | 'hashed'>; is_unique: boolean; table_name: string }> =
    await manager.query(
      `SELECT i.name, i.key_pattern, i.is_unique, i.table_name FROM indexes i JOIN collections c ON c.uuid = i.collection_uuid
       WHERE c.table_name = $1 ORDER BY i.created_at, i.name`,
      [collectionTable],
    );
  return rows.map((r) => ({
    name: r.name,
    keyPattern: r.key_pattern,
    pattern: parseShardKeyPattern(r.key_pattern),
    unique: r.is_unique,
    table: r.table_name,
  }));
}

/** The indexes a write in `manager`'s transaction must maintain, read once per transaction under the write lock. */
export function indexesForWrite(manager: EntityManager, handle: Pick<CollectionHandle, 'table'>): Promise<SecondaryIndex[]> {
  let byTable = loaded.get(manager);
  if (byTable === undefined) loaded.set(manager, (byTable = new Map()));
  let indexes = byTable.get(handle.table);
  if (indexes === undefined) {
    indexes = manager.query(`LOCK TABLE ${handle.table} IN ROW EXCLUSIVE MODE`).then(() => loadIndexes(manager, handle.table));
    byTable.set(handle.table, indexes);
  }
  return indexes;
}

/** A document's entries in each index. Throws `BAD_VALUE` as `indexEntriesOf`. */
export function entriesOf(indexes: readonly SecondaryIndex[], id: Buffer, document: ValueObject): DocumentEntries {
  return { id, perIndex: indexes.map((index) => indexEntriesOf(index.pattern, document)) };
}

/**
 * Adds the documents' entries, in order. Answers the documents (by position in `docs`) that
 * met a unique violation, each with its DUPLICATE_KEY error; their entries are not left behind.
 * One statement per index when nothing conflicts; after a conflict, the batch's entries are
 * taken out again and added document by document, so that an earlier document that fails does
 * not keep a later one out.
 */
export async function addEntries(
  manager: EntityManager,
  ns: string,
  indexes: readonly SecondaryIndex[],
  docs: readonly DocumentEntries[],
): Promise<Map<number, TesseraError>> {
  const conflicts = new Map<number, TesseraError>();
  if (indexes.length === 0 || docs.length === 0) return conflicts;
  if (!(await insertAll(manager, indexes, docs))) return conflicts;
  await removeEntries(manager, indexes, docs);
  for (const [position, doc] of docs.entries()) {
    const conflict = await insertOne(manager, ns, indexes, doc);
    if (conflict !== undefined) conflicts.set(position, conflict);
  }
  return conflicts;
}

/** Adds one document's entries; throws DUPLICATE_KEY (the caller's transaction then rolls back). */
export async function addDocumentEntries(
  manager: EntityManager,
  ns: string,
  indexes: readonly SecondaryIndex[],
  doc: DocumentEntries,
): Promise<void> {
  const conflict = await insertOne(manager, ns, indexes, doc);
  if (conflict !== undefined) throw conflict;
}

/** Removes the documents' entries (entries that are not there are ignored). */
export async function removeEntries(
  manager: EntityManager,
  indexes: readonly SecondaryIndex[],
  docs: readonly DocumentEntries[],
): Promise<void> {
  for (const [i, index] of indexes.entries()) {
    const pairs = docs.flatMap((d) => d.perIndex[i]!.map((e) => ({ key: e.key, id: d.id })));
    if (pairs.length === 0) continue;
    await manager.query(
      `DELETE FROM ${index.table} t USING unnest($1::bytea[], $2::bytea[]) AS u(key, id) WHERE t.key = u.key AND t.id = u.id`,
      [pairs.map((p) => p.key), pairs.map((p) => p.id)],
    );
  }
}

/** Removes the entries of rows a `DELETE ... RETURNING id, doc` took out (the document as stored). */
export async function removeStoredEntries(
  manager: EntityManager,
  indexes: readonly SecondaryIndex[],
  rows: ReadonlyArray<{ id: Buffer; doc?: unknown }>,
): Promise<void> {
  if (indexes.length === 0 || rows.length === 0) return;
  await removeEntries(
    manager,
    indexes,
    rows.map((r) => entriesOf(indexes, r.id, fromExtendedJsonObject(r.doc) as ValueObject)),
  );
}

/** Moves a document's entries from its old to its new version; throws DUPLICATE_KEY or BAD_VALUE. */
export async function replaceEntries(
  manager: EntityManager,
  ns: string,
  indexes: readonly SecondaryIndex[],
  id: Buffer,
  before: ValueObject,
  after: ValueObject,
): Promise<void> {
  if (indexes.length === 0) return;
  const old = entriesOf(indexes, id, before);
  const next = entriesOf(indexes, id, after);
  const keep = (entries: IndexEntry[], others: IndexEntry[]) => {
    const other = new Set(others.map((e) => e.key.toString('hex')));
    return entries.filter((e) => !other.has(e.key.toString('hex')));
  };
  await removeEntries(manager, indexes, [{ id, perIndex: old.perIndex.map((entries, i) => keep(entries, next.perIndex[i]!)) }]);
  await addDocumentEntries(manager, ns, indexes, { id, perIndex: next.perIndex.map((entries, i) => keep(entries, old.perIndex[i]!)) });
}

/** One statement per index; answers whether some entry was refused. */
async function insertAll(manager: EntityManager, indexes: readonly SecondaryIndex[], docs: readonly DocumentEntries[]): Promise<boolean> {
  let refused = false;
  for (const [i, index] of indexes.entries()) {
    const pairs = docs.flatMap((d) => d.perIndex[i]!.map((e) => ({ key: e.key, id: d.id })));
    if (pairs.length === 0) continue;
    const returned: unknown[] = await manager.query(
      `INSERT INTO ${index.table} (key, id)
       SELECT key, id FROM unnest($1::bytea[], $2::bytea[]) WITH ORDINALITY AS u(key, id, n) ORDER BY n
       ON CONFLICT DO NOTHING RETURNING 1`,
      [pairs.map((p) => p.key), pairs.map((p) => p.id)],
    );
    if (returned.length < pairs.length) refused = true;
  }
  return refused;
}

async function insertOne(
  manager: EntityManager,
  ns: string,
  indexes: readonly SecondaryIndex[],
  doc: DocumentEntries,
): Promise<TesseraError | undefined> {
  for (const [i, index] of indexes.entries()) {
    const entries = doc.perIndex[i]!;
    if (entries.length === 0) continue;
    const returned: Array<{ key: Buffer }> = await manager.query(
      `INSERT INTO ${index.table} (key, id) SELECT unnest($1::bytea[]), $2::bytea ON CONFLICT DO NOTHING RETURNING key`,
      [entries.map((e) => e.key), doc.id],
    );
    if (returned.length < entries.length) {
      const inserted = new Set(returned.map((r) => r.key.toString('hex')));
      const refused = entries.find((e) => !inserted.has(e.key.toString('hex')))!;
      await removeEntries(manager, indexes, [doc]);
      return duplicateIndexKey(ns, index, refused.values);
    }
  }
  return undefined;
}

/** MongoDB's E11000 message for a secondary unique index. */
export function duplicateIndexKey(ns: string, index: SecondaryIndex, values: readonly Value[]): TesseraError {
  const keyValue = Object.fromEntries(index.pattern.fields.map((f, i) => [f.path, toExtendedJsonObject(values[i] ?? null)]));
  return new TesseraError(
    'DUPLICATE_KEY',
    `E11000 duplicate key error collection: ${ns} index: ${index.name} dup key: ${JSON.stringify(keyValue)}`,
    { details: { indexName: index.name, keyPattern: index.keyPattern, keyValue } },
  );
}
