import { randomUUID } from 'node:crypto';
import { ObjectId } from 'bson';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { encodeKey, parseShardKeyPattern } from '@tessera/core';
import { type TestDatabase, createTestDatabase } from '../../../../test/pg/test-database.js';
import { CollectionStorageService, tableName } from '../collections/collection-storage.service.js';
import { type CollectionHandle, DocumentStore } from './document-store.js';
import { writeTimeNow } from '../../../../test/fakes/write-times.js';

let db: TestDatabase;
let store: DocumentStore;
const generateId = () => new ObjectId();

beforeAll(async () => {
  db = await createTestDatabase('shard');
  store = new DocumentStore(db.dataSource);
});
afterAll(async () => db?.drop());

/** A fresh collection sharded on `key`, owning keys below `ownedBelow` (everything when undefined). */
async function collection(
  key: Record<string, 1 | 'hashed'>,
  options: { unique?: boolean; ownedBelow?: number } = {},
): Promise<CollectionHandle> {
  const uuid = randomUUID();
  const ns = `db.c${uuid.slice(0, 8)}`;
  await new CollectionStorageService(db.dataSource).createCollection(uuid, { ns, keyPattern: key, unique: options.unique ?? false });
  const limit = options.ownedBelow === undefined ? undefined : Buffer.from(encodeKey([options.ownedBelow]));
  return {
    ns,
    table: tableName(uuid),
    pattern: parseShardKeyPattern(key),
    owns: (k) => limit === undefined || Buffer.compare(Buffer.from(k), limit) < 0,
    writeTime: writeTimeNow(),
  };
}

async function stored(handle: CollectionHandle): Promise<unknown[]> {
  const rows: Array<{ doc: unknown }> = await db.dataSource.query(`SELECT doc FROM ${handle.table} ORDER BY id`);
  return rows.map((r) => r.doc);
}

describe('inserting documents', () => {
  it('stores Extended JSON with the fields in the order written, _id first, and answers the indexes inserted', async () => {
    const handle = await collection({ x: 1 });
    const result = await store.insert(
      handle,
      [
        { x: 1, name: 'a', z: { b: 1, a: 2 } },
        { _id: 7, x: { $numberLong: '9007199254740993' } },
      ],
      { ordered: true, generateId },
    );
    expect(result.insertedCount).toBe(2);
    expect(result.writeErrors).toEqual([]);
    expect(result.inserted).toEqual([0, 1]);
    const docs = await stored(handle);
    const first = docs.find((d) => (d as { x: unknown }).x === 1) as Record<string, unknown>;
    expect(Object.keys(first)).toEqual(['_id', 'x', 'name', 'z']);
    expect(Object.keys(first.z as object)).toEqual(['b', 'a']);
    expect(docs).toContainEqual({ _id: 7, x: { $numberLong: '9007199254740993' } });
  });

  it('stores strings JSON must escape exactly, whether the batch goes in one statement or meets a duplicate', async () => {
    const handle = await collection({ x: 1 });
    const tricky = ['quote " and backslash \\', 'NUL \u0000 and newline \n', 'é, 😀 and \u2028', ',], {"$oid": "x"}'];
    const documents = tricky.map((text, i) => ({ _id: i, x: i, text, nested: [{ text }] }));
    expect((await store.insert(handle, documents, { ordered: false, generateId })).insertedCount).toBe(4);
    const again = await store.insert(
      handle,
      [
        { _id: 0, x: 0 },
        { _id: 9, x: 9, text: tricky[3] },
      ],
      { ordered: false, generateId },
    );
    expect(again.insertedCount).toBe(1);
    expect(await stored(handle)).toEqual([...documents, { _id: 9, x: 9, text: tricky[3] }]);
  });

  it('stops an ordered batch at the first duplicate _id, keeping the documents before it', async () => {
    const handle = await collection({ x: 1 });
    await store.insert(handle, [{ _id: 2, x: 2 }], { ordered: true, generateId });
    const result = await store.insert(
      handle,
      [
        { _id: 1, x: 1 },
        { _id: 2, x: 2 },
        { _id: 3, x: 3 },
      ],
      { ordered: true, generateId },
    );
    expect(result.inserted).toEqual([0]);
    expect(result.writeErrors).toHaveLength(1);
    expect(result.writeErrors[0]).toMatchObject({
      index: 1,
      error: { code: 'DUPLICATE_KEY', details: { keyPattern: { _id: 1 }, keyValue: { _id: 2 } } },
    });
    expect(result.writeErrors[0]!.error.message).toContain('index: _id_ dup key: { _id: 2 }');
    expect((await stored(handle)).map((d) => (d as { _id: number })._id)).toEqual([1, 2]);
  });

  it('goes on past errors in an unordered batch, one error per bad statement', async () => {
    const handle = await collection({ x: 1 });
    const result = await store.insert(
      handle,
      [
        { _id: 1, x: 1 },
        { _id: 1, x: 1 },
        { _id: [3], x: 3 },
        { _id: 4, x: [1, 2] },
        { _id: 5, x: 5 },
      ],
      {
        ordered: false,
        generateId,
      },
    );
    expect(result.inserted).toEqual([0, 4]);
    expect(result.writeErrors.map((e) => [e.index, e.error.code])).toEqual([
      [1, 'DUPLICATE_KEY'],
      [2, 'BAD_VALUE'],
      [3, 'BAD_VALUE'],
    ]);
    expect(result.writeErrors[2]!.error.message).toContain('"x"');
  });

  it('reports a duplicate unique shard key as such, with its key pattern and value', async () => {
    const handle = await collection({ email: 1 }, { unique: true });
    await store.insert(handle, [{ _id: 1, email: 'a@x' }], { ordered: true, generateId });
    const result = await store.insert(handle, [{ _id: 2, email: 'a@x' }], { ordered: true, generateId });
    expect(result.writeErrors[0]!.error).toMatchObject({
      code: 'DUPLICATE_KEY',
      details: { keyPattern: { email: 1 }, keyValue: { email: 'a@x' } },
    });
    expect(result.writeErrors[0]!.error.message).toContain('dup key: { email: "a@x" }');
  });

  it('refuses the whole request with STALE_CONFIG when a document belongs to a chunk this shard does not own', async () => {
    const handle = await collection({ x: 1 }, { ownedBelow: 100 });
    await expect(store.insert(handle, [{ x: 1 }, { x: 500 }], { ordered: false, generateId })).rejects.toMatchObject({
      code: 'STALE_CONFIG',
    });
    expect(await stored(handle)).toEqual([]);
  });
});

describe('the one-statement insert and its fallback', () => {
  it('inserts a batch without conflicts in one statement, outside any transaction', async () => {
    const handle = { ...(await collection({ x: 1 })), indexes: [] };
    // The statement goes to the pool underneath TypeORM (poolStatement), not through a QueryRunner.
    const pool = (db.dataSource.driver as unknown as { master: { query(statement: object): Promise<unknown> } }).master;
    const poolQuery = vi.spyOn(pool, 'query');
    const query = vi.spyOn(db.dataSource, 'query');
    const transaction = vi.spyOn(db.dataSource, 'transaction');
    try {
      const result = await store.insert(
        handle,
        [
          { _id: 1, x: 1 },
          { _id: 2, x: 2 },
        ],
        { ordered: true, generateId },
      );
      expect(result.insertedCount).toBe(2);
      expect(poolQuery).toHaveBeenCalledTimes(1);
      expect(query).not.toHaveBeenCalled();
      expect(transaction).not.toHaveBeenCalled();
    } finally {
      poolQuery.mockRestore();
      query.mockRestore();
      transaction.mockRestore();
    }
  });

  it('an ordered batch repeating an _id of its own keeps the documents before the repeat and nothing after', async () => {
    const handle = await collection({ x: 1 });
    const result = await store.insert(
      handle,
      [
        { _id: 1, x: 1 },
        { _id: 2, x: 2 },
        { _id: 1, x: 3 },
        { _id: 4, x: 4 },
      ],
      { ordered: true, generateId },
    );
    expect(result.inserted).toEqual([0, 1]);
    expect(result.writeErrors).toMatchObject([{ index: 2, error: { code: 'DUPLICATE_KEY', details: { keyValue: { _id: 1 } } } }]);
    expect(await stored(handle)).toEqual([
      { _id: 1, x: 1 },
      { _id: 2, x: 2 },
    ]);
  });

  it('an unordered batch meeting a stored _id inserts every other document', async () => {
    const handle = await collection({ x: 1 });
    await store.insert(handle, [{ _id: 2, x: 2 }], { ordered: false, generateId });
    const result = await store.insert(
      handle,
      [
        { _id: 1, x: 1 },
        { _id: 2, x: 20 },
        { _id: 3, x: 3 },
      ],
      { ordered: false, generateId },
    );
    expect(result.inserted).toEqual([0, 2]);
    expect(result.writeErrors).toMatchObject([{ index: 1, error: { code: 'DUPLICATE_KEY' } }]);
    expect(await stored(handle)).toEqual([
      { _id: 1, x: 1 },
      { _id: 2, x: 2 },
      { _id: 3, x: 3 },
    ]);
  });
});
