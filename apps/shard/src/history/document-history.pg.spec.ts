import { randomUUID } from 'node:crypto';
import { ObjectId } from 'bson';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ClusterTimestamp, parseShardKeyPattern } from '@tessera/core';
import { type TestDatabase, createTestDatabase } from '../../../../test/pg/test-database.js';
import { writeTimeNow } from '../../../../test/fakes/write-times.js';
import { CollectionStorageService, tableName } from '../collections/collection-storage.service.js';
import { CursorManager } from '../documents/cursor-manager.js';
import { DocumentAggregates } from '../documents/document-aggregates.js';
import { type CollectionHandle, DocumentStore } from '../documents/document-store.js';
import { DocumentWrites } from '../documents/document-writes.js';
import { ShardClockStore } from './shard-clock.store.js';
import { clusterTimeToSql, declareWriteTime } from './write-time.js';

/**
 * Document versions on a shard's Postgres: each update and delete keeps the version it replaces
 * (by the trigger on the collection table), and a read at a past time sees exactly the documents
 * of that time, through the cursor, count and distinct paths; trimming drops versions that ended
 * before a time; the clock's ceiling and the start of history persist.
 */
let db: TestDatabase;
let collectionUuid: string;
let base: CollectionHandle;
let writes: DocumentWrites;
let store: DocumentStore;

beforeAll(async () => {
  db = await createTestDatabase('shard');
  writes = new DocumentWrites(db.dataSource, { now: () => new Date(), generateId: () => new ObjectId() });
  store = new DocumentStore(db.dataSource);
  collectionUuid = randomUUID();
  const ns = `hist.items_${collectionUuid.slice(0, 8)}`;
  await new CollectionStorageService(db.dataSource).createCollection(collectionUuid, { ns, keyPattern: { k: 1 } });
  base = { ns, table: tableName(collectionUuid), pattern: parseShardKeyPattern({ k: 1 }), owns: () => true };
});
afterAll(async () => db?.drop());

/** Runs one write with a fresh time; answers the time. */
async function write(work: (handle: CollectionHandle) => Promise<unknown>): Promise<ClusterTimestamp> {
  const writeTime = writeTimeNow();
  await work({ ...base, writeTime });
  return writeTime.time;
}

const at = (time: ClusterTimestamp): CollectionHandle => ({
  ...base,
  indexes: [],
  snapshot: { collectionUuid, time: clusterTimeToSql(time) },
});

async function findAt(time: ClusterTimestamp | undefined): Promise<unknown[]> {
  const batch = await new CursorManager(db.dataSource).find(time === undefined ? base : at(time), { filter: {}, batchSize: 1000 });
  return batch.documents;
}

describe('document history', () => {
  const times: ClusterTimestamp[] = [];

  it('keeps every replaced and deleted version, so that each past time reads as it was', async () => {
    const id = () => new ObjectId();
    times.push(
      await write((h) =>
        store.insert(
          h,
          [
            { _id: 1, k: 1, v: 'a' },
            { _id: 2, k: 2, v: 'a' },
          ],
          { ordered: true, generateId: id },
        ),
      ),
    );
    times.push(await write((h) => writes.update(h, [{ q: { _id: 1 }, u: { $set: { v: 'b' } }, multi: false, upsert: false }], true)));
    times.push(await write((h) => writes.delete(h, [{ q: { _id: 2 }, limit: 1 }], true)));
    times.push(await write((h) => store.insert(h, [{ _id: 3, k: 3, v: 'a' }], { ordered: true, generateId: id })));
    times.push(
      await write((h) =>
        writes.findAndModify(h, { query: { _id: 1 }, update: { $set: { v: 'c' } }, remove: false, new: true, upsert: false }),
      ),
    );
    const states = [
      [
        { _id: 1, k: 1, v: 'a' },
        { _id: 2, k: 2, v: 'a' },
      ],
      [
        { _id: 1, k: 1, v: 'b' },
        { _id: 2, k: 2, v: 'a' },
      ],
      [{ _id: 1, k: 1, v: 'b' }],
      [
        { _id: 1, k: 1, v: 'b' },
        { _id: 3, k: 3, v: 'a' },
      ],
      [
        { _id: 1, k: 1, v: 'c' },
        { _id: 3, k: 3, v: 'a' },
      ],
    ];
    for (const [n, time] of times.entries()) expect(await findAt(time), `at write ${n}`).toEqual(states[n]);
    expect(await findAt({ t: times[0]!.t, i: times[0]!.i - 1 })).toEqual([]);
    expect(await findAt(undefined)).toEqual(states[4]);
    const aggregates = new DocumentAggregates(db.dataSource);
    expect(await aggregates.count(at(times[1]!), {})).toBe(2);
    expect(await aggregates.distinct(at(times[1]!), 'v', {})).toEqual(['a', 'b']);
    expect(await aggregates.distinct(at(times[2]!), 'v', {})).toEqual(['b']);
  });

  it('fails a transaction that changes documents without declaring its time, rather than keep a version with no end', async () => {
    await expect(db.dataSource.query(`DELETE FROM ${base.table}`)).rejects.toThrow(/tessera.write_time|invalid input syntax/);
    expect(await findAt(undefined)).toHaveLength(2);
  });

  it('keeps nothing while history is off', async () => {
    const before: Array<{ n: string }> = await db.dataSource.query('SELECT count(*) AS n FROM document_history');
    await db.dataSource.transaction(async (manager) => {
      await declareWriteTime(manager, { ...writeTimeNow(), keepHistory: false });
      await manager.query(`UPDATE ${base.table} SET doc = doc WHERE id IS NOT NULL`);
    });
    const after: Array<{ n: string }> = await db.dataSource.query('SELECT count(*) AS n FROM document_history');
    expect(after[0]!.n).toBe(before[0]!.n);
  });

  it('trims the versions that ended before a time, and only those', async () => {
    const clockStore = new ShardClockStore(db.dataSource);
    expect(await clockStore.trimHistory(times[2]!, 1)).toBe(1);
    expect(await clockStore.trimHistory(times[2]!, 10)).toBe(0);
    // The version that ended at the delete (times[2]) is still there for reads before it.
    expect(await findAt(times[1]!)).toEqual([
      { _id: 1, k: 1, v: 'b' },
      { _id: 2, k: 2, v: 'a' },
    ]);
  });

  it('persists the clock ceiling (only upwards) and the start of history', async () => {
    const clockStore = new ShardClockStore(db.dataSource);
    await clockStore.raiseCeiling(2_000_000_000);
    await clockStore.raiseCeiling(1_000_000_000);
    expect((await clockStore.load()).ceilingSeconds).toBe(2_000_000_000);
    expect(await clockStore.keepHistorySince({ t: 10, i: 1 })).toEqual({ t: 10, i: 1 });
    expect(await clockStore.keepHistorySince({ t: 20, i: 1 })).toEqual({ t: 10, i: 1 });
    expect(await clockStore.keepHistorySince(null)).toBeNull();
    expect((await clockStore.load()).historySince).toBeNull();
  });
});
