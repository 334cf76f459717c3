import { randomUUID } from 'node:crypto';
import { MinKey, ObjectId } from 'bson';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ValueObject, compareValues, encodeKey, fromExtendedJsonObject, parseShardKeyPattern } from '@tessera/core';
import { checkPipeline, parseFilter, runPipeline } from '@tessera/query';
import { type TestDatabase, createTestDatabase } from '../../../../test/pg/test-database.js';
import { writeTimeNow } from '../../../../test/fakes/write-times.js';
import { CollectionStorageService, tableName } from '../collections/collection-storage.service.js';
import { CursorManager } from './cursor-manager.js';
import { scanConditions } from './document-scan.js';
import { type CollectionHandle, DocumentStore } from './document-store.js';
import { planSqlGroup } from './sql-group.js';

let db: TestDatabase;
let handle: CollectionHandle;
let cursors: CursorManager;
const OWNED_BELOW = 90;

/** Documents whose values MongoDB compares in ways Postgres's text and numerics must be taught. */
const documents: Array<Record<string, unknown>> = Array.from({ length: 100 }, (_, x) => ({
  x,
  status: [`A`, 'B', ['A', 'C'], true, 'true', null][x % 6],
  region: [`r${x % 3}`, x % 5, x % 5 === 0 ? 5.0 : 2.5, null, true][x % 5],
  amount: x % 7 === 0 ? 'n/a' : x % 11 === 0 ? null : (x * 37) % 100,
  ...(x % 13 === 0 ? {} : { qty: x % 4 === 0 ? 0.5 : x % 17 }),
}));

beforeAll(async () => {
  db = await createTestDatabase('shard');
  const uuid = randomUUID();
  await new CollectionStorageService(db.dataSource).createCollection(uuid, { ns: 'db.sales', keyPattern: { x: 1 }, unique: false });
  const pattern = parseShardKeyPattern({ x: 1 });
  const limit = Buffer.from(encodeKey([OWNED_BELOW]));
  handle = {
    ns: 'db.sales',
    table: tableName(uuid),
    pattern,
    // Keys from OWNED_BELOW on are orphans: stored here, owned elsewhere.
    owns: (key) => Buffer.compare(Buffer.from(key), limit) < 0,
    ownedRanges: () => [{ min: [new MinKey()], max: [OWNED_BELOW] }],
    writeTime: writeTimeNow(),
  };
  await new DocumentStore(db.dataSource).insert({ ...handle, owns: () => true }, documents, {
    ordered: true,
    generateId: () => new ObjectId(),
  });
  cursors = new CursorManager(db.dataSource, () => 0);
});
afterAll(async () => db?.drop());

/** The answer from the owned documents in memory: what Postgres's groups must equal. */
function reference(filter: ValueObject, group: ValueObject): ValueObject[] {
  const { matches } = parseFilter(filter);
  const owned = documents.filter((d) => (d['x'] as number) < OWNED_BELOW).map((d) => fromExtendedJsonObject(d) as ValueObject);
  return runPipeline(owned.filter(matches), [{ $group: group }]);
}

const byKey = (groups: ValueObject[]) => [...groups].sort((a, b) => compareValues(a['_id']!, b['_id']!));

async function inPostgres(filter: ValueObject, group: ValueObject): Promise<ValueObject[] | undefined> {
  const plan = planSqlGroup(handle.table, scanConditions(handle, filter), filter, group, handle.pattern, handle.ownedRanges!());
  if (plan === undefined) return undefined;
  return plan.documents(await db.dataSource.query(plan.sql, plan.params));
}

describe('a $group computed by Postgres', () => {
  it.each([
    [
      'every accumulator it computes, keyed by a field of strings, numbers, null and booleans',
      {},
      {
        _id: '$region',
        n: { $sum: 1 },
        c: { $count: {} },
        total: { $sum: '$qty' },
        mean: { $avg: '$qty' },
        low: { $min: '$qty' },
        high: { $max: '$qty' },
      },
    ],
    [
      "the router's partial $avg, after string and boolean equalities matching arrays",
      { status: { $in: ['A', true] } },
      { _id: '$region', s: { $sum: '$qty' }, k: { $sum: { $cond: [{ $isNumber: '$qty' }, 1, 0] } } },
    ],
    ['one group of everything', { status: 'B' }, { _id: null, total: { $sum: '$qty' }, twice: { $sum: 2 } }],
    ['no documents at all', { status: 'nobody' }, { _id: null, n: { $sum: 1 } }],
  ] as Array<[string, ValueObject, ValueObject]>)('%s: as MongoDB groups, orphans left out', async (_, filter, group) => {
    const groups = await inPostgres(filter, group);
    expect(groups).toBeDefined();
    expect(byKey(groups!)).toEqual(byKey(reference(filter, group)));
  });

  it('gives the stage back where Postgres would compare otherwise than MongoDB', async () => {
    // A field holding strings and numbers under $max: MongoDB orders across types.
    expect(await inPostgres({}, { _id: null, m: { $max: '$amount' } })).toBeUndefined();
    // A group key that is an array in some documents (MongoDB groups by the whole array).
    expect(await inPostgres({ status: 'A' }, { _id: '$status', n: { $sum: 1 } })).toBeUndefined();
    // Accumulators, keys and filters it does not translate.
    expect(await inPostgres({}, { _id: null, all: { $push: '$qty' } })).toBeUndefined();
    expect(await inPostgres({}, { _id: { r: '$region' }, n: { $sum: 1 } })).toBeUndefined();
    expect(await inPostgres({ qty: { $gt: 3 } }, { _id: null, n: { $sum: 1 } })).toBeUndefined();
  });

  it('runs in an aggregation, and the stages after it run on its groups', async () => {
    const stages = checkPipeline([{ $group: { _id: '$region', n: { $sum: 1 } } }, { $match: { n: { $gt: 10 } } }, { $sort: { _id: 1 } }]);
    const batch = await cursors.aggregate(handle, { filter: {} }, stages, {});
    const owned = documents.filter((d) => (d['x'] as number) < OWNED_BELOW).map((d) => fromExtendedJsonObject(d) as ValueObject);
    expect(batch.documents.map((d) => fromExtendedJsonObject(d))).toEqual(runPipeline(owned, stages));
  });
});
