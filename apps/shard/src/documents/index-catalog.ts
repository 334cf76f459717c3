import { createHash } from 'node:crypto';
import type { DataSource, EntityManager } from 'typeorm';
import { type ShardKeyPattern, TesseraError, type ValueObject, fromExtendedJsonObject, parseShardKeyPattern } from '@tessera/core';
import type { IndexSpec, ListedIndex } from '@tessera/protocol';
import { type SecondaryIndex, addEntries, entriesOf, loadIndexes } from './index-maintenance.js';
import { defaultIndexName, isPatternPrefix } from './index-keys.js';

/** Documents read per statement while an index is built. */
const BUILD_BATCH = 1_000;

/** The collection a DDL on indexes works on: its uuid, table, namespace and shard key. */
export interface IndexedCollection {
  uuid: string;
  table: string;
  ns: string;
  /** The shard key pattern; `{ _id: 1 }` when unsharded. */
  shardKey: ShardKeyPattern;
  sharded: boolean;
}

/**
 * createIndexes, listIndexes and dropIndexes on one shard. A build holds SHARE ROW EXCLUSIVE on
 * the collection's table (writes wait; reads go on) and reads every document in the same
 * transaction, so the new index holds exactly the collection's documents when it commits, and
 * a failed build (duplicate under unique, a document that cannot be indexed) leaves nothing.
 */
export class SecondaryIndexCatalog {
  constructor(private readonly dataSource: DataSource) {}

  /** Builds the missing indexes; answers how many indexes (with `_id_` and the shard key's) there were and are. */
  async create(collection: IndexedCollection, specs: readonly IndexSpec[]): Promise<{ numIndexesBefore: number; numIndexesAfter: number }> {
    const wanted = specs.map((spec) => validateSpec(collection, spec));
    return this.dataSource.transaction(async (manager) => {
      await manager.query(`LOCK TABLE ${collection.table} IN SHARE ROW EXCLUSIVE MODE`);
      const existing = await loadIndexes(manager, collection.table);
      const before = builtInCount(collection) + existing.length;
      let created = 0;
      for (const index of wanted) {
        const same = [...existing, ...wanted.slice(0, wanted.indexOf(index))].find((e) => e.name === index.name);
        if (same !== undefined) {
          if (JSON.stringify(same.keyPattern) !== JSON.stringify(index.keyPattern) || same.unique !== index.unique) {
            throw new TesseraError(
              'BAD_VALUE',
              `An index named "${index.name}" already exists on ${collection.ns} with key ${JSON.stringify(same.keyPattern)}${same.unique ? ' (unique)' : ''}`,
              { details: { name: index.name, keyPattern: same.keyPattern } },
            );
          }
          if (existing.includes(same)) continue;
        }
        await this.build(manager, collection, index);
        created++;
      }
      return { numIndexesBefore: before, numIndexesAfter: before + created };
    });
  }

  /** `_id_`, the shard key's index (when it is not `{ _id: 1 }`), then the secondary indexes, in creation order. */
  async list(collection: IndexedCollection): Promise<ListedIndex[]> {
    const listed: ListedIndex[] = [{ v: 2, key: { _id: 1 }, name: '_id_' }];
    if (builtInCount(collection) === 2)
      listed.push({ v: 2, key: patternObject(collection.shardKey), name: defaultIndexName(collection.shardKey) });
    for (const index of await loadIndexes(this.dataSource.manager, collection.table))
      listed.push({ v: 2, key: index.keyPattern, name: index.name, ...(index.unique ? { unique: true } : {}) });
    return listed;
  }

  /** Drops a secondary index by name; answers how many indexes there were before. */
  async drop(collection: IndexedCollection, name: string): Promise<{ nIndexesWas: number }> {
    if (name === '_id_' || (builtInCount(collection) === 2 && name === defaultIndexName(collection.shardKey))) {
      throw new TesseraError(
        'ILLEGAL_OPERATION',
        `cannot drop the index "${name}" of ${collection.ns}: it is the _id index or the shard key index`,
        {
          details: { name },
        },
      );
    }
    return this.dataSource.transaction(async (manager) => {
      await manager.query(`LOCK TABLE ${collection.table} IN SHARE ROW EXCLUSIVE MODE`);
      const existing = await loadIndexes(manager, collection.table);
      const index = existing.find((e) => e.name === name);
      if (index === undefined) {
        throw new TesseraError('NOT_FOUND', `index not found with name [${name}] on ${collection.ns}`, { details: { name } });
      }
      await manager.query(`DROP TABLE IF EXISTS ${index.table}`);
      await manager.query('DELETE FROM indexes WHERE collection_uuid = $1 AND name = $2', [collection.uuid, name]);
      return { nIndexesWas: builtInCount(collection) + existing.length };
    });
  }

  private async build(manager: EntityManager, collection: IndexedCollection, index: SecondaryIndex): Promise<void> {
    await manager.query(
      `CREATE TABLE ${index.table} (key bytea NOT NULL, id bytea NOT NULL, PRIMARY KEY (key, id)${index.unique ? ', UNIQUE (key)' : ''})`,
    );
    await manager.query(
      // clock_timestamp, not now(): indexes built by one command list in the order asked.
      'INSERT INTO indexes (collection_uuid, name, key_pattern, is_unique, table_name, created_at) VALUES ($1, $2, $3, $4, $5, clock_timestamp())',
      [collection.uuid, index.name, JSON.stringify(index.keyPattern), index.unique, index.table],
    );
    let after: Buffer = Buffer.alloc(0);
    for (;;) {
      const rows: Array<{ id: Buffer; doc: unknown }> = await manager.query(
        `SELECT id, doc FROM ${collection.table} WHERE id > $1 ORDER BY id LIMIT $2`,
        [after, BUILD_BATCH],
      );
      if (rows.length === 0) break;
      const docs = rows.map((r) => entriesOf([index], r.id, fromExtendedJsonObject(r.doc) as ValueObject));
      const conflicts = await addEntries(manager, collection.ns, [index], docs);
      const [first] = conflicts.values();
      if (first !== undefined) throw first;
      after = rows[rows.length - 1]!.id;
    }
  }
}

/** `_id_` alone, or with the shard key's index when the shard key is not `{ _id: 1 }`. */
function builtInCount(collection: IndexedCollection): 1 | 2 {
  const onlyId =
    collection.shardKey.fields.length === 1 && collection.shardKey.fields[0]!.path === '_id' && !collection.shardKey.fields[0]!.hashed;
  return collection.sharded && !onlyId ? 2 : 1;
}

function patternObject(pattern: ShardKeyPattern): Record<string, 1 | 'hashed'> {
  return Object.fromEntries(pattern.fields.map((f) => [f.path, f.hashed ? 'hashed' : 1]));
}

/**
 * Checks an index spec: the key pattern (1 or "hashed" per field, dotted paths), the name
 * (MongoDB's default when absent), and `unique` only where the shard key is a prefix of the key,
 * because a shard can only check uniqueness among its own documents: with the shard key as a
 * prefix, equal keys always live on one shard. An unsharded collection lives on one shard.
 */
function validateSpec(collection: IndexedCollection, spec: IndexSpec): SecondaryIndex {
  const pattern = parseShardKeyPattern(spec.key);
  const keyPattern = patternObject(pattern);
  const name = spec.name ?? defaultIndexName(pattern);
  const unique = spec.unique ?? false;
  if (name === '_id_' || (builtInCount(collection) === 2 && name === defaultIndexName(collection.shardKey))) {
    throw new TesseraError('BAD_VALUE', `the index name "${name}" is taken by the _id or shard key index of ${collection.ns}`, {
      details: { name },
    });
  }
  if (unique && pattern.fields.some((f) => f.hashed)) {
    throw new TesseraError('BAD_VALUE', `a hashed index cannot be unique (index "${name}")`, { details: { name, key: keyPattern } });
  }
  if (unique && collection.sharded && !isPatternPrefix(collection.shardKey, pattern)) {
    throw new TesseraError(
      'ILLEGAL_OPERATION',
      `cannot create unique index over ${JSON.stringify(keyPattern)} with shard key pattern ${JSON.stringify(patternObject(collection.shardKey))}: the shard key must be a prefix of a unique index`,
      { details: { key: keyPattern, shardKey: patternObject(collection.shardKey) } },
    );
  }
  return { name, keyPattern, pattern, unique, table: sideTableName(collection.uuid, name) };
}

/** `x_<collection uuid hex>_<12 hex digits of the name's SHA-1>`: a safe identifier under Postgres' 63 bytes. */
export function sideTableName(uuid: string, name: string): string {
  const hex = uuid.replaceAll('-', '').toLowerCase();
  return `x_${hex}_${createHash('sha1').update(name).digest('hex').slice(0, 12)}`;
}
