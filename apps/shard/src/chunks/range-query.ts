import type { DataSource } from 'typeorm';
import { type ChunkRange, encodeKey } from '@tessera/core';
import type { DataSizeResult } from '@tessera/protocol';
import { type CollectionStorageService, tableName } from '../collections/collection-storage.service.js';

/** The table this shard stores `ns` in; undefined when it stores no such collection. */
export async function localTable(storage: CollectionStorageService, ns: string): Promise<string | undefined> {
  const local = await storage.localCollection(ns);
  return local === undefined ? undefined : tableName(local.uuid);
}

/** The SQL condition (and its parameters) on `shard_key` that selects `range`; every row without one. */
export function rangeCondition(range: ChunkRange | undefined): { where: string; params: unknown[] } {
  if (range === undefined) return { where: 'true', params: [] };
  return { where: 'shard_key >= $1 AND shard_key < $2', params: [Buffer.from(encodeKey(range.min)), Buffer.from(encodeKey(range.max))] };
}

/** The documents `where` selects in `table` and their bytes, summed: MongoDB's `dataSize`. */
export async function sumRange(dataSource: DataSource, table: string, where: string, params: unknown[]): Promise<DataSizeResult> {
  const rows: Array<{ n: string; bytes: string }> = await dataSource.query(
    `SELECT count(*) AS n, coalesce(sum(size), 0) AS bytes FROM ${table} WHERE ${where}`,
    params,
  );
  return { size: Number(rows[0]?.bytes ?? 0), numObjects: Number(rows[0]?.n ?? 0) };
}
