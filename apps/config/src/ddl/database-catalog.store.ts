import { Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { DataSource, type EntityManager } from 'typeorm';
import { queryRows } from '@tessera/platform';
import type { DatabaseRow } from '../catalog/catalog-rows.js';

/**
 * The databases of the catalog (`databases`) as database DDL reads and writes them, with what
 * dropping one removes besides (its zone ranges). Methods that take a manager run in the
 * caller's transaction; the others on the pool.
 */
@Injectable()
export class DatabaseCatalogStore {
  constructor(private readonly dataSource: DataSource) {}

  /** The database named exactly `name`, if it exists. */
  async find(name: string, manager: EntityManager = this.dataSource.manager): Promise<DatabaseRow | undefined> {
    const rows: DatabaseRow[] = await manager.query('SELECT * FROM databases WHERE name = $1', [name]);
    return rows[0];
  }

  /** The database whose name equals `name` but for case (MongoDB refuses two such names), if any. */
  async findIgnoringCase(manager: EntityManager, name: string): Promise<DatabaseRow | undefined> {
    const rows: DatabaseRow[] = await manager.query('SELECT * FROM databases WHERE lower(name) = lower($1)', [name]);
    return rows[0];
  }

  /** A new database on `primary`, at database version (new uuid, 1). */
  async insert(manager: EntityManager, name: string, primary: string): Promise<DatabaseRow> {
    const inserted: DatabaseRow[] = await manager.query(
      'INSERT INTO databases (name, primary_shard, version_uuid, version_last_mod) VALUES ($1, $2, $3, 1) RETURNING *',
      [name, primary, randomUUID()],
    );
    return inserted[0]!;
  }

  /** The database, locked until the transaction ends, if it exists. */
  async lock(manager: EntityManager, name: string): Promise<DatabaseRow | undefined> {
    const rows: DatabaseRow[] = await manager.query('SELECT * FROM databases WHERE name = $1 FOR UPDATE', [name]);
    return rows[0];
  }

  /** Moves the database's primary to `to`, bumping its version's lastMod; answers the row after. */
  async setPrimary(manager: EntityManager, name: string, to: string): Promise<DatabaseRow> {
    const updated: DatabaseRow[] = await queryRows(
      manager,
      'UPDATE databases SET primary_shard = $2, version_last_mod = version_last_mod + 1 WHERE name = $1 RETURNING *',
      [name, to],
    );
    return updated[0]!;
  }

  /** Removes the database and its collections' zone ranges; answers whether it was there. */
  async remove(manager: EntityManager, name: string): Promise<boolean> {
    const deleted: unknown[] = await queryRows(manager, 'DELETE FROM databases WHERE name = $1 RETURNING name', [name]);
    if (deleted.length === 0) return false;
    await manager.query("DELETE FROM tags WHERE left(ns, length($1) + 1) = $1 || '.'", [name]);
    return true;
  }

  /** The namespaces of the database's sharded collections, in order. */
  async shardedCollections(db: string): Promise<string[]> {
    const collections: Array<{ ns: string }> = await this.dataSource.query('SELECT ns FROM collections WHERE db = $1 ORDER BY ns', [db]);
    return collections.map((c) => c.ns);
  }
}
