import { Injectable } from '@nestjs/common';
import { MaxKey, MinKey } from 'bson';
import { DataSource, type EntityManager } from 'typeorm';
import {
  type Chunk,
  type ClusterTimestamp,
  type ShardKey,
  type ShardKeyPattern,
  TesseraError,
  type Value,
  decodeKey,
  encodeKey,
  typeBracketOf,
} from '@tessera/core';
import type { ShardCollectionResult } from '@tessera/protocol';
import { queryRows } from '@tessera/platform';
import { type ChunkRow, type CollectionRow, insertChunkRows, readableKey } from '../catalog/catalog-rows.js';

/** A collection about to enter the catalog, as shardCollection commits it. */
export interface NewCollection {
  ns: string;
  db: string;
  uuid: string;
  epoch: string;
  timestamp: ClusterTimestamp;
  key: Record<string, 1 | 'hashed'>;
  unique: boolean;
}

/**
 * The sharded collections of the catalog as collection DDL reads and writes them: their
 * `collections` rows, their chunks and their zone ranges (`tags`). Methods that take a manager
 * run in the caller's (fenced) transaction; the others on the pool.
 */
@Injectable()
export class CollectionCatalogStore {
  constructor(private readonly dataSource: DataSource) {}

  /** The catalog row of `ns`, if it is sharded. */
  async find(ns: string): Promise<CollectionRow | undefined> {
    const rows: CollectionRow[] = await this.dataSource.query('SELECT * FROM collections WHERE ns = $1', [ns]);
    return rows[0];
  }

  /** The sharded collection as the catalog has it; `NAMESPACE_NOT_FOUND` if it is not sharded. */
  async describe(ns: string): Promise<ShardCollectionResult> {
    const row = await this.find(ns);
    if (row === undefined) throw new TesseraError('NAMESPACE_NOT_FOUND', `collection "${ns}" is not sharded`, { details: { ns } });
    const shards: Array<{ shard: string; n: string }> = await this.dataSource.query(
      'SELECT shard, count(*) AS n FROM chunks WHERE collection_uuid = $1 GROUP BY shard ORDER BY shard',
      [row.uuid],
    );
    return {
      ns,
      uuid: row.uuid,
      epoch: row.epoch,
      key: row.key_pattern,
      unique: row.is_unique,
      chunks: shards.reduce((sum, s) => sum + Number(s.n), 0),
      shards: shards.map((s) => s.shard),
    };
  }

  /** The shards that own chunks of the collection, by name. */
  async chunkOwners(uuid: string): Promise<string[]> {
    const owners: Array<{ shard: string }> = await this.dataSource.query(
      'SELECT DISTINCT shard FROM chunks WHERE collection_uuid = $1 ORDER BY shard',
      [uuid],
    );
    return owners.map((o) => o.shard);
  }

  /** Removes the collection (its chunks go with it) and its zone ranges; answers whether it was there. */
  async remove(manager: EntityManager, uuid: string, ns: string): Promise<boolean> {
    const deleted: Array<{ ns: string }> = await queryRows(manager, 'DELETE FROM collections WHERE uuid = $1 RETURNING ns', [uuid]);
    if (deleted.length === 0) return false;
    await manager.query('DELETE FROM tags WHERE ns = $1', [ns]);
    return true;
  }

  /** Lets the balancer and moveRange move the collection's chunks again. */
  async allowMigrations(ns: string): Promise<void> {
    await this.dataSource.query('UPDATE collections SET allow_migrations = true, updated_at = now() WHERE ns = $1', [ns]);
  }

  /** The uuid the catalog has for `ns` inside the transaction, if it is sharded. */
  async uuidOf(manager: EntityManager, ns: string): Promise<string | undefined> {
    const rows: Array<{ uuid: string }> = await manager.query('SELECT uuid FROM collections WHERE ns = $1', [ns]);
    return rows[0]?.uuid;
  }

  /** Enters a newly sharded collection and its initial chunks. */
  async insertCollection(manager: EntityManager, collection: NewCollection, pattern: ShardKeyPattern, chunks: Chunk[]): Promise<void> {
    const { ns, db, uuid, epoch, timestamp, key, unique } = collection;
    await manager.query(
      `INSERT INTO collections (ns, db, uuid, epoch, timestamp_t, timestamp_i, key_pattern, is_unique) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
      [ns, db, uuid, epoch, timestamp.t, timestamp.i, JSON.stringify(key), unique],
    );
    await insertChunkRows(manager, uuid, pattern, chunks);
  }

  /** The collection's row, locked until the transaction ends, and its chunks in key order. */
  async lockWithChunks(manager: EntityManager, uuid: string): Promise<{ collection: CollectionRow; chunks: ChunkRow[] }> {
    const locked: CollectionRow[] = await manager.query('SELECT * FROM collections WHERE uuid = $1 FOR UPDATE', [uuid]);
    const chunks: ChunkRow[] = await manager.query('SELECT * FROM chunks WHERE collection_uuid = $1 ORDER BY min', [uuid]);
    return { collection: locked[0]!, chunks };
  }

  /**
   * Writes a refined shard key: the chunks replaced by `chunks` (keyed by `pattern`), the new key,
   * epoch and timestamp on the collection, and migrations allowed again.
   */
  async commitRefinedKey(
    manager: EntityManager,
    refined: { uuid: string; epoch: string; timestamp: ClusterTimestamp; key: Record<string, 1 | 'hashed'> },
    pattern: ShardKeyPattern,
    chunks: Chunk[],
  ): Promise<void> {
    await manager.query('DELETE FROM chunks WHERE collection_uuid = $1', [refined.uuid]);
    await insertChunkRows(manager, refined.uuid, pattern, chunks);
    await manager.query(
      'UPDATE collections SET epoch = $2, timestamp_t = $3, timestamp_i = $4, key_pattern = $5, allow_migrations = true, updated_at = now() WHERE uuid = $1',
      [refined.uuid, refined.epoch, refined.timestamp.t, refined.timestamp.i, JSON.stringify(refined.key)],
    );
  }

  /** Zone ranges follow a refined key as chunk bounds do: MinKey suffixes, MaxKey after a MaxKey. */
  async extendZoneRanges(manager: EntityManager, ns: string, pattern: ShardKeyPattern, added: number): Promise<void> {
    const tags: Array<{ min: Buffer; max: Buffer }> = await manager.query('SELECT min, max FROM tags WHERE ns = $1', [ns]);
    const extend = (bound: ShardKey): ShardKey => {
      const isMax = typeBracketOf(bound[bound.length - 1]!) === 'maxKey';
      return [...bound, ...Array.from({ length: added }, (): Value => (isMax ? new MaxKey() : new MinKey()))];
    };
    for (const tag of tags) {
      const min = extend(decodeKey(tag.min));
      const max = extend(decodeKey(tag.max));
      await manager.query('UPDATE tags SET min = $3, max = $4, min_ejson = $5, max_ejson = $6 WHERE ns = $1 AND min = $2', [
        ns,
        tag.min,
        Buffer.from(encodeKey(min)),
        Buffer.from(encodeKey(max)),
        readableKey(pattern, min),
        readableKey(pattern, max),
      ]);
    }
  }
}
