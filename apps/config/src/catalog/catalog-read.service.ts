import { Injectable } from '@nestjs/common';
import { DataSource, type EntityManager } from 'typeorm';
import { type ChunkVersion, type CollectionGeneration, TesseraError, isSameGeneration, makeChunkVersion } from '@tessera/core';
import { parseWith } from '@tessera/platform';
import {
  type CatalogCollection,
  type CatalogDatabase,
  type GetChunksRequest,
  type GetChunksResult,
  chunkToWire,
  getChunksRequestSchema,
} from '@tessera/protocol';
import {
  type ChunkRow,
  type CollectionRow,
  type DatabaseRow,
  chunkFromRow,
  databaseVersionOfRow,
  generationOfRow,
} from './catalog-rows.js';

/**
 * Routing reads for routers and shards (MongoDB's reads of config.databases, config.collections
 * and config.chunks). `getChunks` is what a routing table cache refreshes from: a full read when
 * the caller has nothing cached or caches another generation, otherwise only the chunks newer
 * than its cached collection version, found through the (collection_uuid, major, minor) index,
 * so an incremental refresh costs in proportion to what changed.
 */
@Injectable()
export class CatalogReadService {
  constructor(private readonly dataSource: DataSource) {}

  /** Returns a database's entry. Throws `NAMESPACE_NOT_FOUND` when it does not exist. */
  async getDatabase(name: string): Promise<CatalogDatabase> {
    const rows: DatabaseRow[] = await this.dataSource.query('SELECT * FROM databases WHERE name = $1', [name]);
    const row = rows[0];
    if (row === undefined) throw new TesseraError('NAMESPACE_NOT_FOUND', `Database "${name}" does not exist.`, { details: { db: name } });
    return { name: row.name, primaryShard: row.primary_shard, version: databaseVersionOfRow(row) };
  }

  /** Returns a sharded collection's entry with its collection version. Throws `NAMESPACE_NOT_FOUND` when it is not sharded. */
  async getCollection(ns: string): Promise<CatalogCollection> {
    return this.dataSource.transaction('REPEATABLE READ', async (manager) => {
      const row = await findCollection(manager, ns);
      const generation = generationOfRow(row);
      return {
        ns: row.ns,
        uuid: row.uuid,
        epoch: row.epoch,
        timestamp: generation.timestamp,
        keyPattern: row.key_pattern,
        unique: row.is_unique,
        maxChunkSizeBytes: row.max_chunk_size_bytes === null ? null : Number(row.max_chunk_size_bytes),
        balancingEnabled: row.balancing_enabled,
        autoMergingEnabled: row.auto_merging_enabled,
        allowMigrations: row.allow_migrations,
        collectionVersion: await readCollectionVersion(manager, row.uuid, generation),
      };
    });
  }

  /**
   * Returns the chunks of `ns`: all of them (`full: true`, in key order) when `sinceVersion` is
   * absent or of another generation, else those with a version above it (`full: false`). One
   * REPEATABLE READ snapshot, so the chunks and the collection version agree.
   * Throws `BAD_VALUE` on a malformed request, `NAMESPACE_NOT_FOUND` when `ns` is not sharded.
   */
  async getChunks(request: GetChunksRequest): Promise<GetChunksResult> {
    const { ns, sinceVersion } = parseWith(getChunksRequestSchema, request, 'getChunks request');
    return this.dataSource.transaction('REPEATABLE READ', async (manager) => {
      const row = await findCollection(manager, ns);
      const generation = generationOfRow(row);
      const full = sinceVersion === undefined || !isSameGeneration(sinceVersion, generation);
      const chunkRows: ChunkRow[] = full
        ? await manager.query('SELECT * FROM chunks WHERE collection_uuid = $1 ORDER BY min', [row.uuid])
        : await manager.query('SELECT * FROM chunks WHERE collection_uuid = $1 AND (major, minor) > ($2, $3) ORDER BY min', [
            row.uuid,
            sinceVersion.major,
            sinceVersion.minor,
          ]);
      return {
        ns: row.ns,
        uuid: row.uuid,
        epoch: generation.epoch,
        timestamp: generation.timestamp,
        keyPattern: row.key_pattern,
        collectionVersion: await readCollectionVersion(manager, row.uuid, generation),
        full,
        chunks: chunkRows.map((c) => chunkToWire(chunkFromRow(c, generation))),
      };
    });
  }
}

/** Reads a collection row. Throws `NAMESPACE_NOT_FOUND` when `ns` is not a sharded collection. */
export async function findCollection(manager: EntityManager, ns: string, options: { forUpdate?: boolean } = {}): Promise<CollectionRow> {
  const rows: CollectionRow[] = await manager.query(`SELECT * FROM collections WHERE ns = $1${options.forUpdate ? ' FOR UPDATE' : ''}`, [
    ns,
  ]);
  const row = rows[0];
  if (row === undefined)
    throw new TesseraError('NAMESPACE_NOT_FOUND', `Collection ${ns} is not sharded (no catalog entry).`, { details: { ns } });
  return row;
}

/**
 * The collection version: the highest (major, minor) of its chunks, read backwards from the
 * (collection_uuid, major, minor) index. Throws `INTERNAL` when the collection has no chunk,
 * which the catalog never allows for a sharded collection.
 */
export async function readCollectionVersion(manager: EntityManager, uuid: string, generation: CollectionGeneration): Promise<ChunkVersion> {
  const rows: Array<{ major: number; minor: number }> = await manager.query(
    'SELECT major, minor FROM chunks WHERE collection_uuid = $1 ORDER BY major DESC, minor DESC LIMIT 1',
    [uuid],
  );
  const top = rows[0];
  if (top === undefined) throw new TesseraError('INTERNAL', `Collection ${uuid} has no chunks.`, { details: { uuid } });
  return makeChunkVersion(generation, top.major, top.minor);
}
