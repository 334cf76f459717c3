import { Injectable } from '@nestjs/common';
import { DataSource, type EntityManager } from 'typeorm';
import {
  type ClusterTimestamp,
  TesseraError,
  encodeKey,
  extractShardKey,
  fromExtendedJsonObject,
  parseShardKeyPattern,
  type ShardKeyPattern,
  type ValueObject,
} from '@tessera/core';
import { type ShardCollectionSpec, type ShardStats, shardCollectionSpecSchema } from '@tessera/protocol';
import { parseWith } from '@tessera/platform';
import { VALID_FROM_DEFAULT, clusterTimeFromSql, clusterTimeToSql } from '../history/write-time.js';

/** Drops a collection's table, its index side tables and its catalog row, in `manager`'s transaction. */
async function dropIn(manager: EntityManager, uuid: string): Promise<void> {
  const sideTables: Array<{ table_name: string }> = await manager.query('SELECT table_name FROM indexes WHERE collection_uuid = $1', [
    uuid,
  ]);
  for (const { table_name } of sideTables) await manager.query(`DROP TABLE IF EXISTS ${table_name}`);
  await manager.query(`DROP TABLE IF EXISTS ${tableName(uuid)}`);
  await manager.query('DELETE FROM collection_size_changes WHERE collection_uuid = $1', [uuid]);
  await manager.query('DELETE FROM collection_sizes WHERE collection_uuid = $1', [uuid]);
  await manager.query('DELETE FROM collections WHERE uuid = $1', [uuid]);
}

/**
 * The statement triggers that keep a collection's totals in `collection_sizes`
 * (migrations/shard/1764700000000-collection-sizes.ts, which has the same text).
 */
function sizeTriggersSql(table: string, uuid: string): string {
  return `
    CREATE OR REPLACE TRIGGER size_insert_trigger AFTER INSERT ON ${table} REFERENCING NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION note_size_change('${uuid}');
    CREATE OR REPLACE TRIGGER size_update_trigger AFTER UPDATE ON ${table} REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION note_size_change('${uuid}');
    CREATE OR REPLACE TRIGGER size_delete_trigger AFTER DELETE ON ${table} REFERENCING OLD TABLE AS old_rows
      FOR EACH STATEMENT EXECUTE FUNCTION note_size_change('${uuid}');`;
}

interface CollectionRow {
  uuid: string;
  ns: string;
  table_name: string;
  key_pattern: Record<string, 1 | 'hashed'>;
}

/** Documents re-keyed per statement when a shard key is refined. */
const REFINE_BATCH = 1_000;

/** A collection in this shard's local catalog, with its stored key pattern parsed. */
export interface LocalCollection {
  uuid: string;
  keyPattern: Record<string, 1 | 'hashed'>;
  pattern: ShardKeyPattern;
  /** For a collection movePrimary cloned here: the time from which its history here is complete. */
  historySince: ClusterTimestamp | null;
}

/**
 * The shard's storage of collections: one table per collection, named by its uuid, holding the
 * encoded `_id` (primary key: `_id` is unique per shard, as in MongoDB), the encoded shard key
 * (btree, unique for a unique shard key), the document as Extended JSON, and its BSON size.
 * The document column is `json`, not `jsonb`: jsonb reorders a document's fields, while MongoDB
 * keeps them in the order written (and compares embedded documents field by field in order).
 * Every operation is idempotent, because DDL coordinators repeat phases after a failover.
 */
@Injectable()
export class CollectionStorageService {
  /**
   * Local catalog lookups, remembered: this process is the only writer of its catalog, and each
   * of its writes below forgets what it changed, so data commands skip a round trip.
   */
  private readonly byNs = new Map<string, LocalCollection>();
  /** Bumped by every catalog write, so a lookup that raced one does not remember a stale row. */
  private generation = 0;

  constructor(private readonly dataSource: DataSource) {}

  /** The collection this shard stores under `ns`, or undefined. */
  async localCollection(ns: string): Promise<LocalCollection | undefined> {
    const cached = this.byNs.get(ns);
    if (cached !== undefined) return cached;
    const generation = this.generation;
    const rows: Array<{ uuid: string; key_pattern: Record<string, 1 | 'hashed'>; history_since: string | null }> =
      await this.dataSource.query('SELECT uuid, key_pattern, history_since FROM collections WHERE ns = $1', [ns]);
    const row = rows[0];
    if (row === undefined) return undefined;
    const found = {
      uuid: row.uuid,
      keyPattern: row.key_pattern,
      pattern: parseShardKeyPattern(row.key_pattern),
      historySince: row.history_since === null ? null : clusterTimeFromSql(row.history_since),
    };
    if (generation === this.generation) this.byNs.set(ns, found);
    return found;
  }

  /**
   * Runs a local catalog write, forgetting remembered lookups before it (so lookups racing it
   * remember nothing) and after it (so none read during it survives).
   */
  private async writingCatalog<T>(work: () => Promise<T>): Promise<T> {
    this.generation++;
    this.byNs.clear();
    try {
      return await work();
    } finally {
      this.generation++;
      this.byNs.clear();
    }
  }

  /** Creates the collection's table and shard key index (with the documents' sizes) if missing. */
  async createCollection(uuid: string, input: ShardCollectionSpec): Promise<void> {
    const spec = parseWith(shardCollectionSpecSchema, input, 'collection');
    parseShardKeyPattern(spec.keyPattern);
    const table = tableName(uuid);
    await this.writingCatalog(() =>
      this.dataSource.transaction(async (manager) => {
        await manager.query(
          `CREATE TABLE IF NOT EXISTS ${table} (
             id bytea PRIMARY KEY, shard_key bytea NOT NULL, doc json NOT NULL, size integer NOT NULL,
             valid_from int8 NOT NULL DEFAULT ${VALID_FROM_DEFAULT})`,
        );
        // Keeps each replaced or deleted version (migrations/shard/1764300000000-document-history.ts).
        await manager.query(
          `CREATE OR REPLACE TRIGGER document_history_trigger AFTER UPDATE OF doc OR DELETE ON ${table}
           FOR EACH ROW EXECUTE FUNCTION keep_document_history('${uuid}')`,
        );
        await manager.query(sizeTriggersSql(table, uuid));
        await manager.query('INSERT INTO collection_sizes VALUES ($1, 0, 0) ON CONFLICT DO NOTHING', [uuid]);
        // `size` rides along in the index: the sizes of key ranges (dataSize, statsForBalancing) are then
        // index-only scans wherever vacuum has marked the pages all-visible.
        await manager.query(
          `CREATE ${spec.unique ? 'UNIQUE ' : ''}INDEX IF NOT EXISTS ${table}_shard_key ON ${table} (shard_key) INCLUDE (size)`,
        );
        await manager.query(
          `INSERT INTO collections (uuid, ns, db, key_pattern, is_unique, table_name) VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (uuid) DO UPDATE SET key_pattern = EXCLUDED.key_pattern`,
          [uuid, spec.ns, spec.ns.slice(0, spec.ns.indexOf('.')), JSON.stringify(spec.keyPattern), spec.unique, table],
        );
      }),
    );
  }

  /** Records that the collection's history here is complete from `time` on (movePrimary's clone). */
  async markHistorySince(uuid: string, time: ClusterTimestamp): Promise<void> {
    await this.writingCatalog(() =>
      this.dataSource.query('UPDATE collections SET history_since = $2 WHERE uuid = $1', [uuid, clusterTimeToSql(time)]),
    );
  }

  /** Drops the collection's table and its index side tables; a collection this shard never had is not an error. */
  async dropCollection(uuid: string): Promise<void> {
    await this.writingCatalog(() => this.dataSource.transaction((manager) => dropIn(manager, uuid)));
  }

  /**
   * Gives the collection `uuid` the name `to` in one transaction, after dropping the collection
   * of that name when `dropTarget` (`NAMESPACE_EXISTS` otherwise). Idempotent: a collection that
   * has the name already is left alone. Answers whether the collection is here.
   */
  async renameCollection(uuid: string, to: string, dropTarget: boolean): Promise<boolean> {
    return this.writingCatalog(() =>
      this.dataSource.transaction(async (manager) => {
        const [source] = (await manager.query('SELECT ns FROM collections WHERE uuid = $1 FOR UPDATE', [uuid])) as Array<{ ns: string }>;
        if (source === undefined) return false;
        if (source.ns === to) return true;
        const targets = (await manager.query('SELECT uuid FROM collections WHERE ns = $1 FOR UPDATE', [to])) as Array<{ uuid: string }>;
        for (const target of targets) {
          if (!dropTarget) throw new TesseraError('NAMESPACE_EXISTS', `target namespace ${to} exists`, { details: { ns: to } });
          await dropIn(manager, target.uuid);
        }
        await manager.query('UPDATE collections SET ns = $2, db = $3 WHERE uuid = $1', [uuid, to, to.slice(0, to.indexOf('.'))]);
        return true;
      }),
    );
  }

  /** The collection this shard stores under `ns`, with its document count; undefined if none. */
  async describeNamespace(ns: string): Promise<{ uuid: string; keyPattern: Record<string, 1 | 'hashed'>; documents: number } | undefined> {
    const rows: Array<CollectionRow> = await this.dataSource.query(
      'SELECT uuid, ns, table_name, key_pattern FROM collections WHERE ns = $1',
      [ns],
    );
    const row = rows[0];
    if (row === undefined) return undefined;
    const counted: Array<{ n: string }> = await this.dataSource.query(`SELECT count(*) AS n FROM ${tableName(row.uuid)}`);
    return { uuid: row.uuid, keyPattern: row.key_pattern, documents: Number(counted[0]!.n) };
  }

  /** The namespaces this shard stores for a database. */
  async namespacesOf(db: string): Promise<string[]> {
    const rows: Array<{ ns: string }> = await this.dataSource.query('SELECT ns FROM collections WHERE db = $1 ORDER BY ns', [db]);
    return rows.map((r) => r.ns);
  }

  /** Drops the collection stored under `ns` (sharded or not); answers whether there was one. */
  async dropNamespace(ns: string): Promise<boolean> {
    const rows: Array<{ uuid: string }> = await this.dataSource.query('SELECT uuid FROM collections WHERE ns = $1', [ns]);
    for (const row of rows) await this.dropCollection(row.uuid);
    return rows.length > 0;
  }

  /** Drops every collection of a database. Returns how many were dropped. */
  async dropDatabase(db: string): Promise<number> {
    const rows: CollectionRow[] = await this.dataSource.query('SELECT uuid FROM collections WHERE db = $1', [db]);
    for (const row of rows) await this.dropCollection(row.uuid);
    return rows.length;
  }

  /** The namespace of the collection stored under `uuid`, if any. */
  async namespaceOf(uuid: string): Promise<string | undefined> {
    const rows: Array<{ ns: string }> = await this.dataSource.query('SELECT ns FROM collections WHERE uuid = $1', [uuid]);
    return rows[0]?.ns;
  }

  /**
   * Re-keys every document of a collection for a refined shard key (the old key's fields plus
   * suffix fields; a missing suffix field is null), in batches of one transaction, and records
   * the new pattern; all or nothing.
   */
  async refineShardKey(uuid: string, keyPattern: Record<string, 1 | 'hashed'>): Promise<number> {
    const pattern = parseShardKeyPattern(keyPattern);
    const table = tableName(uuid);
    // One transaction: a document that cannot take the new key (an array in a new field) undoes
    // the whole re-key, and writes wait meanwhile (reads go on), so no document is left keyed by
    // a pattern the collection does not have.
    return this.writingCatalog(() =>
      this.dataSource.transaction(async (manager) => {
        await manager.query(`LOCK TABLE ${table} IN SHARE ROW EXCLUSIVE MODE`);
        let after: Buffer = Buffer.alloc(0);
        let rekeyed = 0;
        for (;;) {
          const docs: Array<{ id: Buffer; doc: unknown }> = await manager.query(
            `SELECT id, doc FROM ${table} WHERE id > $1 ORDER BY id LIMIT $2`,
            [after, REFINE_BATCH],
          );
          if (docs.length === 0) break;
          const ids = docs.map((d) => d.id);
          const keys = docs.map((d) => Buffer.from(encodeKey(extractShardKey(pattern, fromExtendedJsonObject(d.doc) as ValueObject))));
          await manager.query(
            `UPDATE ${table} t SET shard_key = k.key FROM unnest($1::bytea[], $2::bytea[]) AS k(id, key) WHERE t.id = k.id`,
            [ids, keys],
          );
          rekeyed += docs.length;
          after = docs[docs.length - 1]!.id;
        }
        await manager.query('UPDATE collections SET key_pattern = $2 WHERE uuid = $1', [uuid, JSON.stringify(keyPattern)]);
        return rekeyed;
      }),
    );
  }

  /** The bytes this shard stores in collection tables, indexes included. */
  async stats(): Promise<ShardStats> {
    const rows: Array<{ bytes: string; n: string }> = await this.dataSource.query(
      `SELECT coalesce(sum(pg_total_relation_size(quote_ident(table_name))), 0) AS bytes, count(*) AS n FROM collections`,
    );
    return { dataSizeBytes: Number(rows[0]?.bytes ?? 0), collections: Number(rows[0]?.n ?? 0) };
  }
}

/** `c_` and the uuid's hex digits: a safe identifier that needs no quoting. */
export function tableName(uuid: string): string {
  const hex = uuid.replaceAll('-', '').toLowerCase();
  if (!/^[0-9a-f]{32}$/.test(hex)) throw new Error(`not a uuid: ${uuid}`);
  return `c_${hex}`;
}
