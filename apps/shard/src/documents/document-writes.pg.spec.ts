import { randomUUID } from 'node:crypto';
import { ObjectId } from 'bson';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseShardKeyPattern } from '@tessera/core';
import { type TestDatabase, createTestDatabase } from '../../../../test/pg/test-database.js';
import { CollectionStorageService, tableName } from '../collections/collection-storage.service.js';
import { DocumentAggregates } from './document-aggregates.js';
import { type CollectionHandle, DocumentStore } from './document-store.js';
import { DocumentWrites } from './document-writes.js';
import { writeTimeNow } from '../../../../test/fakes/write-times.js';

let db: TestDatabase;
let handle: CollectionHandle;
let writes: DocumentWrites;
let aggregates: DocumentAggregates;
const now = new Date('2026-11-23T10:00:00Z');

beforeAll(async () => {
  db = await createTestDatabase('shard');
  writes = new DocumentWrites(db.dataSource, { now: () => now, generateId: () => new ObjectId() });
  aggregates = new DocumentAggregates(db.dataSource);
});
afterAll(async () => db?.drop());

beforeEach(async () => {
  const uuid = randomUUID();
  const ns = `shop.items_${uuid.slice(0, 8)}`;
  await new CollectionStorageService(db.dataSource).createCollection(uuid, { ns, keyPattern: { sku: 1 } });
  handle = { ns, table: tableName(uuid), pattern: parseShardKeyPattern({ sku: 1 }), owns: () => true, writeTime: writeTimeNow() };
  await new DocumentStore(db.dataSource).insert(
    handle,
    [
      { _id: 1, sku: 'a', qty: 5, tags: ['x', 'y'] },
      { _id: 2, sku: 'b', qty: 0, tags: ['y'] },
      { _id: 3, sku: 'c', qty: 5, tags: [] },
    ],
    { ordered: true, generateId: () => new ObjectId() },
  );
});

async function all(): Promise<Array<Record<string, unknown>>> {
  return (await db.dataSource.query(`SELECT doc FROM ${handle.table} ORDER BY id`)).map((r: { doc: Record<string, unknown> }) => r.doc);
}

describe('updates', () => {
  it('update one matching document unless multi, counting matched and modified', async () => {
    expect(await writes.update(handle, [{ q: { qty: 5 }, u: { $inc: { qty: 1 } }, multi: false, upsert: false }], true)).toMatchObject({
      matchedCount: 1,
      modifiedCount: 1,
    });
    expect(
      await writes.update(handle, [{ q: { qty: { $gte: 5 } }, u: { $set: { seen: true } }, multi: true, upsert: false }], true),
    ).toMatchObject({ matchedCount: 2, modifiedCount: 2 });
    expect(
      await writes.update(handle, [{ q: { seen: true }, u: { $set: { seen: true } }, multi: true, upsert: false }], true),
    ).toMatchObject({ matchedCount: 2, modifiedCount: 0 });
    expect((await all()).map((d) => d.qty)).toEqual([6, 0, 5]);
  });

  it('upsert a document built from the filter and the update when nothing matches', async () => {
    const result = await writes.update(
      handle,
      [{ q: { sku: 'z' }, u: { $set: { qty: 9 }, $setOnInsert: { created: true } }, multi: false, upsert: true }],
      true,
    );
    expect(result.upserted).toHaveLength(1);
    expect((await all()).find((d) => d.sku === 'z')).toMatchObject({ sku: 'z', qty: 9, created: true });
  });

  it('refuse to change a shard key value or an _id, applying nothing of that statement', async () => {
    const result = await writes.update(
      handle,
      [
        { q: { _id: 1 }, u: { $set: { sku: 'moved', qty: 100 } }, multi: false, upsert: false },
        { q: { _id: 2 }, u: { $set: { _id: 20 } }, multi: false, upsert: false },
      ],
      false,
    );
    expect(result.writeErrors.map((e) => [e.index, e.error.code])).toEqual([
      [0, 'ILLEGAL_OPERATION'],
      [1, 'IMMUTABLE_FIELD'],
    ]);
    expect((await all()).map((d) => [d._id, d.sku, d.qty])).toEqual([
      [1, 'a', 5],
      [2, 'b', 0],
      [3, 'c', 5],
    ]);
  });

  it('stop an ordered batch at its first failing statement, keeping the ones before', async () => {
    const result = await writes.update(
      handle,
      [
        { q: { _id: 1 }, u: { $inc: { qty: 1 } }, multi: false, upsert: false },
        { q: { _id: 2 }, u: { $inc: { sku: 1 } }, multi: false, upsert: false },
        { q: { _id: 3 }, u: { $inc: { qty: 1 } }, multi: false, upsert: false },
      ],
      true,
    );
    expect(result).toMatchObject({ matchedCount: 1, modifiedCount: 1 });
    expect(result.writeErrors.map((e) => e.index)).toEqual([1]);
    expect((await all()).map((d) => d.qty)).toEqual([6, 0, 5]);
  });
});

describe('deletes', () => {
  it('delete one or all matching documents', async () => {
    expect(await writes.delete(handle, [{ q: { qty: 5 }, limit: 1 }], true)).toEqual({ deletedCount: 1, writeErrors: [] });
    expect(await writes.delete(handle, [{ q: {}, limit: 0 }], true)).toEqual({ deletedCount: 2, writeErrors: [] });
    expect(await all()).toEqual([]);
  });
});

describe('findAndModify', () => {
  it('answer the document before or after an update, picking the first by sort', async () => {
    const before = await writes.findAndModify(handle, {
      query: { qty: 5 },
      sort: { sku: -1 },
      update: { $inc: { qty: 10 } },
      remove: false,
      new: false,
      upsert: false,
    });
    expect(before).toEqual({ value: { _id: 3, sku: 'c', qty: 5, tags: [] }, lastErrorObject: { n: 1, updatedExisting: true } });
    const after = await writes.findAndModify(handle, {
      query: { _id: 3 },
      update: { $inc: { qty: 1 } },
      remove: false,
      new: true,
      upsert: false,
      fields: { qty: 1 },
    });
    expect(after.value).toEqual({ _id: 3, qty: 16 });
  });

  it('remove, upsert, and answer null when nothing matches', async () => {
    expect((await writes.findAndModify(handle, { query: { _id: 2 }, remove: true, new: false, upsert: false })).value).toMatchObject({
      _id: 2,
    });
    expect(await writes.findAndModify(handle, { query: { _id: 2 }, remove: true, new: false, upsert: false })).toEqual({
      value: null,
      lastErrorObject: { n: 0, updatedExisting: false },
    });
    const upserted = await writes.findAndModify(handle, {
      query: { sku: 'q' },
      update: { $set: { qty: 1 } },
      remove: false,
      new: true,
      upsert: true,
    });
    expect(upserted.value).toMatchObject({ sku: 'q', qty: 1 });
    expect(upserted.lastErrorObject.updatedExisting).toBe(false);
  });

  it('refuse remove together with an update', async () => {
    await expect(
      writes.findAndModify(handle, { query: {}, update: { $set: { a: 1 } }, remove: true, new: false, upsert: false }),
    ).rejects.toMatchObject({ code: 'FAILED_TO_PARSE' });
  });
});

describe('count and distinct', () => {
  it('count matching documents after skip and under limit', async () => {
    expect(await aggregates.count(handle, {})).toBe(3);
    expect(await aggregates.count(handle, { qty: 5 })).toBe(2);
    expect(await aggregates.count(handle, {}, 1, 1)).toBe(1);
  });

  it('distinct values in MongoDB order, arrays contributing their elements', async () => {
    expect(await aggregates.distinct(handle, 'tags', {})).toEqual(['x', 'y']);
    expect(await aggregates.distinct(handle, 'qty', {})).toEqual([0, 5]);
    expect(await aggregates.distinct(handle, 'missing', {})).toEqual([]);
  });

  it('never count a document this shard does not own', async () => {
    const partial = { ...handle, owns: () => false };
    expect(await aggregates.count(partial, {})).toBe(0);
  });
});
