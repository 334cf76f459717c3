import { randomUUID } from 'node:crypto';
import { ObjectId } from 'bson';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type ValueObject, decodeKey, parseShardKeyPattern } from '@tessera/core';
import { type TestDatabase, createTestDatabase } from '../../../../test/pg/test-database.js';
import { CollectionStorageService, tableName } from '../collections/collection-storage.service.js';
import { CursorManager } from './cursor-manager.js';
import { scanConditions } from './document-scan.js';
import { type CollectionHandle, DocumentStore } from './document-store.js';
import { DocumentWrites } from './document-writes.js';
import { type IndexedCollection, SecondaryIndexCatalog } from './index-catalog.js';
import { loadIndexes } from './index-maintenance.js';
import { writeTimeNow } from '../../../../test/fakes/write-times.js';

let db: TestDatabase;
let storage: CollectionStorageService;
let catalog: SecondaryIndexCatalog;
let store: DocumentStore;
let writes: DocumentWrites;
let collection: IndexedCollection;
let handle: CollectionHandle;
const generateId = () => new ObjectId();

beforeAll(async () => {
  db = await createTestDatabase('shard');
  storage = new CollectionStorageService(db.dataSource);
  catalog = new SecondaryIndexCatalog(db.dataSource);
  store = new DocumentStore(db.dataSource);
  writes = new DocumentWrites(db.dataSource, { now: () => new Date('2026-11-23T10:00:00Z'), generateId });
});
afterAll(async () => db?.drop());

beforeEach(async () => {
  const uuid = randomUUID();
  const ns = `shop.items_${uuid.slice(0, 8)}`;
  await storage.createCollection(uuid, { ns, keyPattern: { sku: 1 } });
  collection = { uuid, table: tableName(uuid), ns, shardKey: parseShardKeyPattern({ sku: 1 }), sharded: true };
  handle = { ns, table: tableName(uuid), pattern: collection.shardKey, owns: () => true, writeTime: writeTimeNow() };
  await insert([
    { _id: 1, sku: 'a', qty: 5, tags: ['x', 'y'] },
    { _id: 2, sku: 'b', qty: 0, tags: ['y'] },
    { _id: 3, sku: 'c', qty: 5 },
  ]);
});

async function insert(documents: unknown[], ordered = true) {
  return store.insert(handle, documents, { ordered, generateId });
}

/** The handle as the shard service gives it to scans: with the indexes' side tables. */
async function indexedHandle(): Promise<CollectionHandle> {
  const indexes = await loadIndexes(db.dataSource.manager, handle.table);
  return { ...handle, indexes: indexes.map((i) => ({ pattern: i.pattern, table: i.table })) };
}

/** Every entry of an index as [decoded key, _id], sorted. */
async function entriesOf(name: string): Promise<unknown[]> {
  const index = (await loadIndexes(db.dataSource.manager, handle.table)).find((i) => i.name === name)!;
  const rows: Array<{ key: Buffer; id: Buffer }> = await db.dataSource.query(`SELECT key, id FROM ${index.table} ORDER BY key, id`);
  return rows.map((r) => [decodeKey(r.key), decodeKey(r.id)[0]]);
}

async function find(filter: ValueObject, h: CollectionHandle): Promise<unknown[]> {
  const batch = await new CursorManager(db.dataSource).find(h, { filter, batchSize: 1000 });
  return batch.documents;
}

describe('createIndexes', () => {
  it('builds entries for existing documents, one per element of an array (multikey)', async () => {
    expect(await catalog.create(collection, [{ key: { tags: 1 } }])).toEqual({ numIndexesBefore: 2, numIndexesAfter: 3 });
    expect(await entriesOf('tags_1')).toEqual([
      [[null], 3],
      [['x'], 1],
      [['y'], 1],
      [['y'], 2],
    ]);
  });

  it('creating the same index again changes nothing; the same name with another key is refused', async () => {
    await catalog.create(collection, [{ key: { qty: 1 } }]);
    expect(await catalog.create(collection, [{ key: { qty: 1 } }])).toEqual({ numIndexesBefore: 3, numIndexesAfter: 3 });
    await expect(catalog.create(collection, [{ key: { tags: 1 }, name: 'qty_1' }])).rejects.toMatchObject({ code: 'BAD_VALUE' });
  });

  it('unique needs the shard key as a prefix of the index key', async () => {
    await expect(catalog.create(collection, [{ key: { qty: 1 }, unique: true }])).rejects.toMatchObject({
      code: 'ILLEGAL_OPERATION',
      message: expect.stringMatching(/"qty":1.*"sku":1/),
    });
    await catalog.create(collection, [{ key: { sku: 1, qty: 1 }, unique: true }]);
  });

  it('a build meeting a duplicate under unique fails and leaves no index behind', async () => {
    const unsharded = { ...collection, sharded: false };
    await expect(catalog.create(unsharded, [{ key: { qty: 1 }, unique: true }])).rejects.toMatchObject({ code: 'DUPLICATE_KEY' });
    expect(await loadIndexes(db.dataSource.manager, handle.table)).toEqual([]);
    const tables: unknown[] = await db.dataSource.query(`SELECT 1 FROM pg_tables WHERE tablename LIKE $1`, [
      `x_${collection.uuid.replaceAll('-', '')}%`,
    ]);
    expect(tables).toEqual([]);
  });

  it('lists _id_, the shard key index and the secondary indexes; drops by name', async () => {
    await catalog.create(collection, [
      { key: { sku: 1, qty: 1 }, unique: true },
      { key: { tags: 1 }, name: 'by_tag' },
    ]);
    expect(await catalog.list(collection)).toEqual([
      { v: 2, key: { _id: 1 }, name: '_id_' },
      { v: 2, key: { sku: 1 }, name: 'sku_1' },
      { v: 2, key: { sku: 1, qty: 1 }, name: 'sku_1_qty_1', unique: true },
      { v: 2, key: { tags: 1 }, name: 'by_tag' },
    ]);
    expect(await catalog.drop(collection, 'by_tag')).toEqual({ nIndexesWas: 4 });
    await expect(catalog.drop(collection, 'by_tag')).rejects.toMatchObject({ code: 'NOT_FOUND', message: /index not found with name/ });
    await expect(catalog.drop(collection, 'sku_1')).rejects.toMatchObject({ code: 'ILLEGAL_OPERATION' });
    await expect(catalog.drop(collection, '_id_')).rejects.toMatchObject({ code: 'ILLEGAL_OPERATION' });
  });

  it('dropping the collection drops its index tables', async () => {
    await catalog.create(collection, [{ key: { tags: 1 } }]);
    await storage.dropCollection(collection.uuid);
    const tables: unknown[] = await db.dataSource.query(`SELECT 1 FROM pg_tables WHERE tablename LIKE $1`, [
      `x_${collection.uuid.replaceAll('-', '')}%`,
    ]);
    expect(tables).toEqual([]);
  });
});

describe('maintenance in every write', () => {
  beforeEach(async () => {
    await catalog.create(collection, [{ key: { tags: 1 } }, { key: { sku: 1, qty: 1 }, unique: true }]);
  });

  it('inserts, updates and deletes keep the entries equal to the documents', async () => {
    await insert([{ _id: 4, sku: 'd', tags: ['z', 'z'] }]);
    await writes.update(handle, [{ q: { _id: 1 }, u: { $set: { tags: ['w'] } }, multi: false, upsert: false }], true);
    await writes.delete(handle, [{ q: { _id: 2 }, limit: 1 }], true);
    await writes.findAndModify(handle, { query: { _id: 3 }, remove: true, new: false, upsert: false });
    await writes.update(handle, [{ q: { sku: 'e' }, u: { $set: { tags: ['v'] } }, multi: false, upsert: true }], true);
    const upserted = (await db.dataSource.query(
      `SELECT id FROM ${handle.table} WHERE shard_key = (SELECT shard_key FROM ${handle.table} ORDER BY shard_key DESC LIMIT 1)`,
    )) as Array<{ id: Buffer }>;
    expect(await entriesOf('tags_1')).toEqual([
      [['v'], decodeKey(upserted[0]!.id)[0]],
      [['w'], 1],
      [['z'], 4],
    ]);
  });

  it('a unique violation on insert is a duplicate key error for that document only; ordered stops there', async () => {
    const result = await insert(
      [
        { _id: 10, sku: 'a', qty: 6 },
        { _id: 11, sku: 'a', qty: 5 },
        { _id: 12, sku: 'a', qty: 7 },
      ],
      false,
    );
    expect(result.inserted).toEqual([0, 2]);
    expect(result.writeErrors).toMatchObject([{ index: 1, error: { code: 'DUPLICATE_KEY', message: /index: sku_1_qty_1/ } }]);
    const ordered = await insert([
      { _id: 20, sku: 'q', qty: 1 },
      { _id: 21, sku: 'a', qty: 5 },
      { _id: 22, sku: 'r' },
    ]);
    expect(ordered.inserted).toEqual([0]);
    expect(await entriesOf('sku_1_qty_1')).toHaveLength(6);
    expect((await entriesOf('tags_1')).filter((e) => (e as unknown[])[1] === 11 || (e as unknown[])[1] === 21)).toEqual([]);
  });

  it('a unique violation on update or upsert fails the statement and leaves nothing of it', async () => {
    await insert([{ _id: 4, sku: 'a', qty: 6 }]);
    const update = await writes.update(
      handle,
      [{ q: { _id: 4 }, u: { $set: { qty: 5, tags: ['n'] } }, multi: false, upsert: false }],
      true,
    );
    expect(update.writeErrors).toMatchObject([{ index: 0, error: { code: 'DUPLICATE_KEY' } }]);
    const upsert = await writes.update(
      handle,
      [{ q: { sku: 'c', qty: 5, _id: 9 }, u: { $set: { tags: ['n'] } }, multi: false, upsert: true }],
      true,
    );
    expect(upsert.writeErrors).toMatchObject([{ index: 0, error: { code: 'DUPLICATE_KEY' } }]);
    expect((await entriesOf('tags_1')).filter((e) => JSON.stringify(e).includes('"n"'))).toEqual([]);
    expect(await db.dataSource.query(`SELECT count(*)::int AS n FROM ${handle.table}`)).toEqual([{ n: 4 }]);
  });

  it('a document with parallel arrays is refused', async () => {
    await catalog.create(collection, [{ key: { tags: 1, sizes: 1 } }]);
    const result = await insert([{ _id: 30, sku: 'p', tags: ['a'], sizes: [1, 2] }]);
    expect(result.writeErrors).toMatchObject([{ index: 0, error: { code: 'BAD_VALUE', message: /parallel arrays/ } }]);
  });
});

describe('an insert racing an index build', () => {
  /** Resolves once `count` backends of this database wait for a lock. */
  async function lockWaiters(count: number): Promise<void> {
    for (let i = 0; i < 500; i++) {
      const [row] = (await db.dataSource.query(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
      )) as Array<{ n: number }>;
      if (row!.n >= count) return;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    throw new Error(`fewer than ${count} backends waited for a lock`);
  }

  it('an insert whose handle lists no index, queued behind a build, still writes its entries', async () => {
    // Hold the build between taking its table lock and committing: it waits on `indexes`.
    const blocker = db.dataSource.createQueryRunner();
    await blocker.startTransaction();
    await blocker.query('LOCK TABLE indexes IN EXCLUSIVE MODE');
    const build = catalog.create(collection, [{ key: { tags: 1 } }]);
    await lockWaiters(1);
    const inserting = store.insert({ ...handle, indexes: [] }, [{ _id: 40, sku: 'n', tags: ['late'] }], { ordered: true, generateId });
    await lockWaiters(2);
    await blocker.commitTransaction();
    await blocker.release();
    await build;
    expect((await inserting).insertedCount).toBe(1);
    expect((await entriesOf('tags_1')).filter((e) => (e as unknown[])[1] === 40)).toEqual([[['late'], 40]]);
  });
});

describe('query pushdown', () => {
  beforeEach(async () => {
    await insert(Array.from({ length: 200 }, (_, i) => ({ _id: 100 + i, sku: `s${i}`, qty: i % 10, tags: [`t${i % 7}`, 'all'] })));
    await catalog.create(collection, [{ key: { tags: 1 } }, { key: { qty: 1 } }]);
  });

  it.each([
    [{ tags: 't3' }],
    [{ tags: { $in: ['t1', 'x'] } }],
    [{ qty: { $gte: 8 } }],
    [{ qty: { $gt: 5, $lt: 7 } }],
    [{ $and: [{ qty: 5 }, { tags: 'y' }] }],
    [{ tags: { $gt: 't5', $lt: 'w' } }],
    [{ tags: null }],
  ])('%j uses an index and finds exactly what a full scan finds', async (filter) => {
    const indexed = await indexedHandle();
    expect(scanConditions(indexed, filter as ValueObject).sql).toMatch(/id IN \(SELECT id FROM x_/);
    const sortById = (docs: unknown[]) => docs.map((d) => JSON.stringify(d)).sort();
    const expected = await find(filter as ValueObject, handle);
    expect(expected.length).toBeGreaterThan(0);
    expect(sortById(await find(filter as ValueObject, indexed))).toEqual(sortById(expected));
  });

  it('reads only the rows the index points at', async () => {
    const indexed = await indexedHandle();
    const where = scanConditions(indexed, { tags: 't3' });
    const [plan] = (await db.dataSource.query(
      `EXPLAIN (ANALYZE, FORMAT JSON) SELECT id FROM ${handle.table} WHERE ${where.sql}`,
      where.params,
    )) as Array<{
      'QUERY PLAN': unknown;
    }>;
    const text = JSON.stringify(plan!['QUERY PLAN']);
    expect(text).toMatch(/x_[0-9a-f]+_[0-9a-f]+/);
    const documents = await find({ tags: 't3' }, indexed);
    expect(documents).toHaveLength(29);
  });

  it('a filter no index can narrow scans without one', async () => {
    expect(scanConditions(await indexedHandle(), { sku: 's1', $or: [{ qty: 1 }, { tags: 'x' }] }).sql).not.toMatch(/x_/);
  });
});
