import type { ObjectId } from 'bson';
import {
  TesseraError,
  type Value,
  type ValueObject,
  encodeKey,
  extractShardKey,
  extractShardKeyFromWire,
  fromExtendedJsonObject,
  toExtendedJsonObject,
} from '@tessera/core';
import { prepareInsert, prepareWireInsert } from '@tessera/query';
import type { WriteTime } from '../history/write-time.js';
import type { CollectionHandle } from './document-store.js';

/** A document of an insert, prepared for the insert statement. */
export interface PreparedRow {
  index: number;
  id: Buffer;
  shardKey: Buffer;
  doc: string;
  size: number;
  _id: Value;
  /** The stored document, decoded: only inserts into a collection with secondary indexes read it. */
  document: () => ValueObject;
}

/**
 * The rows of an insert, from the parameters `rowParameters` makes, numbered `n` in request
 * order. The documents come as one JSON array, cut into elements by Postgres: as a `json[]`
 * parameter each would be escaped into an array literal by the driver, element by element, and
 * unescaped again by Postgres; joining them is a fraction of that (docs/benchmarks.md).
 */
export const ROWS_FROM =
  'ROWS FROM (unnest($1::bytea[]), unnest($2::bytea[]), json_array_elements($3::json), unnest($4::int[])) WITH ORDINALITY AS u(id, shard_key, doc, size, n)';

/**
 * The parameters `ROWS_FROM` reads: `_id`s, shard keys, the documents as one JSON array, sizes;
 * then (`$5`) the write's time, which the insert stamps every row with.
 */
export function rowParameters(rows: readonly PreparedRow[], writeTime: WriteTime): [Buffer[], Buffer[], string, number[], string] {
  return [
    rows.map((r) => r.id),
    rows.map((r) => r.shardKey),
    `[${rows.map((r) => r.doc).join(',')}]`,
    rows.map((r) => r.size),
    writeTime.sql,
  ];
}

/** Inserts the rows of `ROWS_FROM` into `table` unless the collection has a secondary index (`$6` is the table's name). */
export function insertUnindexedSql(table: string): string {
  return `INSERT INTO ${table} (id, shard_key, doc, size, valid_from)
         SELECT id, shard_key, doc, size, $5::int8 FROM ${ROWS_FROM}
         WHERE NOT EXISTS (SELECT 1 FROM indexes i JOIN collections c ON c.uuid = i.collection_uuid WHERE c.table_name = $6)
         ORDER BY n`;
}

/** What a retryable insert records for each document it stored. */
export function recordedInserts(rows: readonly PreparedRow[]): Array<{ index: number; shardKey: Uint8Array; result: { op: 'insert' } }> {
  return rows.map((r) => ({ index: r.index, shardKey: r.shardKey, result: { op: 'insert' } }));
}

/**
 * A document of an insert as the statement stores it: validated (an `_id` generated first when
 * missing), its `_id` and shard key encoded. Throws `STALE_CONFIG` when this shard does not own
 * the shard key (the sender's routing was stale), else the statement's validation error.
 */
export function prepareRow(handle: CollectionHandle, input: unknown, index: number, generateId: () => ObjectId): PreparedRow {
  const wire = prepareWireInsert(input, { generateId });
  if (wire !== undefined) {
    const key = encodeKey(extractShardKeyFromWire(handle.pattern, input as Record<string, unknown>, wire.generated ? wire.id : undefined));
    checkOwned(handle, key, index);
    return {
      index,
      id: Buffer.from(encodeKey([wire.id])),
      shardKey: Buffer.from(key),
      doc: wire.text,
      size: wire.size,
      _id: wire.id,
      document: () => fromExtendedJsonObject(JSON.parse(wire.text)) as ValueObject,
    };
  }
  const document =
    input !== null && typeof input === 'object' && !Array.isArray(input) ? (fromExtendedJsonObject(input) as ValueObject) : input;
  const { document: prepared, size } = prepareInsert(document, { generateId }, index);
  const key = encodeKey(extractShardKey(handle.pattern, prepared));
  checkOwned(handle, key, index);
  const _id = prepared['_id'] as Value;
  return {
    index,
    id: Buffer.from(encodeKey([_id])),
    shardKey: Buffer.from(key),
    doc: JSON.stringify(toExtendedJsonObject(prepared)),
    size,
    _id,
    document: () => prepared,
  };
}

/** Throws `STALE_CONFIG` when this shard does not own `key`: the sender's routing was stale. */
function checkOwned(handle: CollectionHandle, key: Uint8Array, index: number): void {
  if (!handle.owns(key)) {
    throw new TesseraError('STALE_CONFIG', `document ${index} of the insert into ${handle.ns} belongs to a chunk this shard does not own`, {
      details: { namespace: handle.ns, index },
    });
  }
}
