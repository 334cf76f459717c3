import { randomUUID } from 'node:crypto';
import { ObjectId } from 'bson';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeKey, fromExtendedJsonObject, parseShardKeyPattern } from '@tessera/core';
import { type TestDatabase, createTestDatabase } from '../../../../test/pg/test-database.js';
import { CollectionStorageService, tableName } from '../collections/collection-storage.service.js';
import { parseFilter } from '@tessera/query';
import { CursorManager } from './cursor-manager.js';
import { type CollectionHandle, DocumentStore } from './document-store.js';
import { writeTimeNow } from '../../../../test/fakes/write-times.js';

let db: TestDatabase;
let handle: CollectionHandle;
let clock = 0;
let cursors: CursorManager;
const COUNT = 2_500;

beforeAll(async () => {
  db = await createTestDatabase('shard');
  const uuid = randomUUID();
  await new CollectionStorageService(db.dataSource).createCollection(uuid, { ns: 'db.items', keyPattern: { x: 1 }, unique: false });
  handle = { ns: 'db.items', table: tableName(uuid), pattern: parseShardKeyPattern({ x: 1 }), owns: () => true, writeTime: writeTimeNow() };
  const documents = Array.from({ length: COUNT }, (_, i) => ({ x: i, even: i % 2 === 0, tag: `t${i % 7}` }));
  await new DocumentStore(db.dataSource).insert(handle, documents, { ordered: true, generateId: () => new ObjectId() });
  cursors = new CursorManager(db.dataSource, () => clock);
});
afterAll(async () => db?.drop());

async function drain(first: { cursorId: string | null; documents: unknown[] }, batchSize?: number): Promise<unknown[]> {
  const all = [...first.documents];
  let cursorId = first.cursorId;
  while (cursorId !== null) {
    const next = await cursors.getMore(cursorId, batchSize);
    all.push(...next.documents);
    cursorId = next.cursorId;
  }
  return all;
}

const xs = (documents: unknown[]) => documents.map((d) => (d as { x: number }).x);

describe('finding documents', () => {
  it('streams every document exactly once through first batch and getMores', async () => {
    const first = await cursors.find(handle, { batchSize: 700 });
    expect(first.documents).toHaveLength(700);
    const all = await drain(first, 900);
    expect(new Set(xs(all)).size).toBe(COUNT);
    expect(cursors.openCursors).toBe(0);
  });

  it('answers a first batch of 101 by default, as MongoDB', async () => {
    const first = await cursors.find(handle, {});
    expect(first.documents).toHaveLength(101);
    cursors.kill([first.cursorId!]);
  });

  it('matches a range on the shard key and the rest of the filter', async () => {
    const found = await drain(await cursors.find(handle, { filter: { x: { $gte: 100, $lt: 200 }, even: true } }));
    expect(xs(found).sort((a, b) => a - b)).toEqual(Array.from({ length: 50 }, (_, i) => 100 + 2 * i));
  });

  it('narrows string and boolean equalities in Postgres, and finds exactly what the filter matches', async () => {
    const uuid = randomUUID();
    await new CollectionStorageService(db.dataSource).createCollection(uuid, { ns: 'db.kinds', keyPattern: { x: 1 }, unique: false });
    const kinds = {
      ns: 'db.kinds',
      table: tableName(uuid),
      pattern: parseShardKeyPattern({ x: 1 }),
      owns: () => true,
      writeTime: writeTimeNow(),
    };
    const values = ['A', 'a', ['B', 'A'], [['A']], true, 'true', false, null, { f: 'A' }, 1, { $numberDecimal: '1' }, 'it\'s "A"'];
    const documents = [...values.map((f, x) => ({ x, f })), { x: values.length }];
    await new DocumentStore(db.dataSource).insert(kinds, documents, { ordered: true, generateId: () => new ObjectId() });
    const found = async (filter: Record<string, unknown>) =>
      xs(await drain(await cursors.find(kinds, { filter: fromExtendedJsonObject(filter) as never }))).sort((a, b) => a - b);
    // What the filter alone matches over every document: the narrowing must lose none of them.
    const matching = (filter: Record<string, unknown>) => {
      const { matches } = parseFilter(fromExtendedJsonObject(filter));
      return documents.filter((d) => matches(fromExtendedJsonObject(d) as never)).map((d) => d.x);
    };
    const filters = [
      { f: 'A' },
      { f: true },
      { f: 'true' },
      { f: { $in: ['a', false] } },
      { $and: [{ f: { $eq: 'B' } }, { x: { $lt: 5 } }] },
      { f: 'it\'s "A"' },
      { f: 1 },
    ];
    for (const filter of filters) expect(await found(filter), JSON.stringify(filter)).toEqual(matching(filter));
    expect(await found({ f: 'A' })).toEqual([0, 2]);
    expect(await found({ f: { $in: ['a', false] } })).toEqual([1, 6]);
  });

  it('sorts, skips and limits, and projects', async () => {
    const found = await drain(
      await cursors.find(handle, { filter: { tag: 't3' }, sort: { x: -1 }, skip: 2, limit: 5, projection: { x: 1, _id: 0 } }),
    );
    const expected = Array.from({ length: COUNT }, (_, i) => i)
      .filter((i) => i % 7 === 3)
      .reverse()
      .slice(2, 7);
    expect(found).toEqual(expected.map((x) => ({ x })));
  });

  it('pages through every document of a shard key value held by more documents than a page', async () => {
    // A point query's first page is a named statement; the pages after it resume after the last `_id`.
    const uuid = randomUUID();
    await new CollectionStorageService(db.dataSource).createCollection(uuid, { ns: 'db.tagged', keyPattern: { tag: 1 }, unique: false });
    const tagged = {
      ns: 'db.tagged',
      table: tableName(uuid),
      pattern: parseShardKeyPattern({ tag: 1 }),
      owns: () => true,
      writeTime: writeTimeNow(),
    };
    const documents = Array.from({ length: COUNT }, (_, i) => ({ x: i, tag: i % 2 === 0 ? 'even' : 'odd' }));
    await new DocumentStore(db.dataSource).insert(tagged, documents, { ordered: true, generateId: () => new ObjectId() });
    for (const tag of ['odd', 'even', 'odd']) {
      const found = await drain(await cursors.find(tagged, { filter: { tag }, batchSize: 1_200 }), 1_100);
      const expected = Array.from({ length: COUNT }, (_, i) => i).filter((i) => (i % 2 === 0) === (tag === 'even'));
      expect(xs(found).sort((a, b) => a - b)).toEqual(expected);
    }
  });

  it('never returns a document whose key this shard does not own', async () => {
    const below = Buffer.from(encodeKey([1_000]));
    const owning = { ...handle, owns: (key: Uint8Array) => Buffer.compare(Buffer.from(key), below) < 0 };
    const found = await drain(await cursors.find(owning, { filter: { x: { $gte: 990, $lt: 1_010 } } }));
    expect(xs(found).sort((a, b) => a - b)).toEqual(Array.from({ length: 10 }, (_, i) => 990 + i));
  });

  it('ends a batch before the document that would take it past the byte limit (16 MiB, as MongoDB), with or without a sort', async () => {
    const sizes = (await db.dataSource.query(`SELECT DISTINCT size FROM ${handle.table}`)) as Array<{ size: number }>;
    expect(sizes).toHaveLength(1); // every document has the same BSON size
    const bounded = new CursorManager(db.dataSource, () => clock, 10 * sizes[0]!.size);
    const drainBounded = async (request: Parameters<CursorManager['find']>[1]) => {
      let batch = await bounded.find(handle, { batchSize: 101, ...request });
      const found: unknown[] = [];
      const lengths: number[] = [];
      for (;;) {
        found.push(...batch.documents);
        lengths.push(batch.documents.length);
        if (batch.cursorId === null) return { found, lengths };
        batch = await bounded.getMore(batch.cursorId, 101);
      }
    };
    /** Batches of 10 documents, the last one the rest. */
    const tens = (n: number) => [...Array<number>(Math.floor(n / 10)).fill(10), ...(n % 10 > 0 ? [n % 10] : [])];
    // Even x below 600, among rows the filter rejects: 300 documents.
    const filter = { x: { $lt: 600 }, even: true };
    for (const sort of [undefined, { x: -1 }]) {
      for (const [skip, limit] of [
        [0, 0],
        [15, 0],
        [3, 44],
      ] as const) {
        const { found, lengths } = await drainBounded({ filter, skip, limit, ...(sort ? { sort } : {}) });
        const expected = Array.from({ length: 300 }, (_, i) => 2 * i).slice(skip, limit > 0 ? skip + limit : undefined);
        expect(lengths).toEqual(tens(expected.length));
        expect(sort ? xs(found) : xs(found).sort((a, b) => a - b)).toEqual(sort ? expected.map((x) => 598 - x) : expected);
      }
    }
    // Sized as projected: a tenth of a document's size holds a few small projections.
    const { lengths } = await drainBounded({ filter: { x: { $lt: 100 } }, projection: { x: 1, _id: 0 } });
    expect(lengths.length).toBeLessThan(10);
    // A document larger than the limit comes alone.
    const tiny = new CursorManager(db.dataSource, () => clock, 1);
    const first = await tiny.find(handle, { filter: { x: { $lt: 3 } }, batchSize: 101 });
    expect(first.documents).toHaveLength(1);
    expect((await tiny.getMore(first.cursorId!, 101)).documents).toHaveLength(1);
    tiny.kill([first.cursorId!]);
  });

  it('refuses an unknown cursor, and closes idle ones after the timeout', async () => {
    await expect(cursors.getMore('12345')).rejects.toMatchObject({ code: 'CURSOR_NOT_FOUND' });
    const open = await cursors.find(handle, { batchSize: 1 });
    clock += 600_001;
    expect(cursors.reapIdle()).toBe(1);
    await expect(cursors.getMore(open.cursorId!)).rejects.toMatchObject({ code: 'CURSOR_NOT_FOUND' });
  });

  it('refuses bad options, naming them', async () => {
    await expect(cursors.find(handle, { limit: -1 })).rejects.toMatchObject({
      code: 'BAD_VALUE',
      message: expect.stringContaining('limit'),
    });
    await expect(cursors.find(handle, { filter: { x: { $near: 1 } } })).rejects.toMatchObject({ code: 'BAD_VALUE' });
  });
});
