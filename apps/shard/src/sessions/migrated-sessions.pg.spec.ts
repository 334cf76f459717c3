import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { MaxKey, MinKey } from 'bson';
import { encodeKey } from '@tessera/core';
import type { MigratedSession } from '@tessera/protocol';
import { type TestDatabase, createTestDatabase } from '../../../../test/pg/test-database.js';
import type { StatementResult } from '../documents/statement-history.js';
import { type HistoryRange, INCOMPLETE_HISTORY_STMT_ID, TransactionsStore } from './transactions.store.js';

let db: TestDatabase;
const store = new TransactionsStore();
let collectionUuid: string;

beforeAll(async () => {
  db = await createTestDatabase('shard');
});
afterAll(async () => db?.drop());
beforeEach(() => {
  collectionUuid = randomUUID();
});

const key = (x: number) => Buffer.from(encodeKey([x]));
const range = (min: number, max: number): HistoryRange => ({ collectionUuid, min: key(min), max: key(max) });
const update = (n: number): StatementResult => ({ op: 'update', n, nModified: n });

/** Records, and folds, a retryable write of `lsid` at `txnNumber`: one statement per shard key in `keys` (stmtId = index + `firstStmtId`). */
async function write(lsid: string, txnNumber: number, keys: Array<number | undefined>, firstStmtId = 0, uuid = collectionUuid) {
  await db.dataSource.transaction(async (manager) => {
    const statements = keys.map((k, i) => ({ stmtId: firstStmtId + i, shardKey: k === undefined ? undefined : key(k), result: update(1) }));
    await store.recordStatements(manager, uuid, [{ lsid, txnNumber, statements }]);
    await store.foldLog(manager);
  });
}

const historyIn = (r: HistoryRange, afterLsid?: string, limit = 100) =>
  store.sessionHistoryInRange(db.dataSource.manager, r, afterLsid, limit);
const apply = (sessions: MigratedSession[]) =>
  db.dataSource.transaction((manager) => store.applyMigratedSessions(manager, collectionUuid, sessions));

async function recorded(lsid: string): Promise<{ txnNumber: number | undefined; stmtIds: number[] }> {
  const [record] = await db.dataSource.query('SELECT txn_number, stmt_ids FROM txn_records WHERE lsid = $1', [lsid]);
  return {
    txnNumber: record === undefined ? undefined : Number(record.txn_number),
    stmtIds: ((record?.stmt_ids ?? []) as number[]).sort((a, b) => a - b),
  };
}

/** The session's executed statements and image, as a write would load them. */
const loaded = (lsid: string, manager = db.dataSource.manager) => store.loadSession(manager, lsid);

const migrated = (lsid: string, txnNumber: number, stmtIds: number[], image?: MigratedSession['image']): MigratedSession => ({
  lsid,
  txnNumber,
  lastWriteAt: new Date('2026-01-01T00:00:00Z').toISOString(),
  statements: stmtIds.map((stmtId) => ({ stmtId, shardKey: key(stmtId).toString('hex'), result: JSON.stringify(update(1)) })),
  ...(image ? { image } : {}),
});

describe("reading a range's history", () => {
  it('selects the statements whose shard key lies in [min, max) of the collection, and only those', async () => {
    const lsid = randomUUID();
    await write(lsid, 1, [5, 10, 19, 20, 25, undefined]);
    await write(randomUUID(), 1, [12], 0, randomUUID());
    const history = await historyIn(range(10, 20));
    expect(history).toHaveLength(1);
    expect(history[0]).toMatchObject({ lsid, txnNumber: 1 });
    expect(history[0]!.statements.map((s) => s.stmtId)).toEqual([1, 2]);
    expect(history[0]!.statements[0]).toEqual({
      stmtId: 1,
      shardKey: key(10).toString('hex'),
      result: '{"op":"update","n":1,"nModified":1}',
    });
  });

  it('sends a session with a statement that wrote no document to every range, marked incomplete', async () => {
    const lsid = randomUUID();
    await write(lsid, 1, [15, undefined]);
    const [inRange] = await historyIn(range(10, 20));
    expect(inRange).toMatchObject({ lsid, incompleteHistory: true });
    expect(inRange!.statements.map((s) => s.stmtId)).toEqual([0]);
    expect(await historyIn(range(30, 40))).toMatchObject([{ lsid, statements: [], incompleteHistory: true }]);
    const complete = randomUUID();
    await write(complete, 1, [35]);
    expect((await historyIn(range(30, 40))).find((h) => h.lsid === complete)).not.toHaveProperty('incompleteHistory');
  });

  it('covers the whole key space with MinKey and MaxKey bounds', async () => {
    await write(randomUUID(), 1, [-1e9, 0, 1e9]);
    const whole = { collectionUuid, min: Buffer.from(encodeKey([new MinKey()])), max: Buffer.from(encodeKey([new MaxKey()])) };
    expect((await historyIn(whole))[0]!.statements).toHaveLength(3);
  });

  it('pages by lsid, and carries the image only when it is of the current txnNumber', async () => {
    const lsids = [randomUUID(), randomUUID(), randomUUID()].sort();
    for (const lsid of lsids) await write(lsid, 2, [15]);
    await db.dataSource.transaction(async (manager) => {
      await store.recordImage(manager, lsids[0]!, 2, 'postImage', { _id: 1, z: 1, a: 2 });
      await store.recordImage(manager, lsids[1]!, 1, 'preImage', { _id: 2 });
    });
    const first = await historyIn(range(10, 20), undefined, 2);
    expect(first.map((s) => s.lsid)).toEqual(lsids.slice(0, 2));
    expect(first[0]!.image).toEqual({ kind: 'postImage', document: '{"_id":1,"z":1,"a":2}' });
    expect(first[1]!.image).toBeUndefined();
    expect((await historyIn(range(10, 20), first[1]!.lsid, 2)).map((s) => s.lsid)).toEqual(lsids.slice(2));
  });
});

describe('applying migrated history', () => {
  it('creates a session that is not here, with its statements and image, and applying it again changes nothing', async () => {
    const lsid = randomUUID();
    const session = migrated(lsid, 3, [0, 1], { kind: 'preImage', document: '{"_id":7,"b":1,"a":0}' });
    expect(await apply([session])).toEqual([lsid]);
    expect(await apply([session])).toEqual([lsid]);
    expect(await recorded(lsid)).toEqual({ txnNumber: 3, stmtIds: [0, 1] });
    expect((await loaded(lsid))?.image).toEqual({ kind: 'preImage', document: { _id: 7, b: 1, a: 0 } });
    expect([...(await loaded(lsid))!.statements.entries()]).toEqual([
      [0, update(1)],
      [1, update(1)],
    ]);
  });

  it('incomplete history leaves its sentinel beside the statements, once however often applied', async () => {
    const lsid = randomUUID();
    const session = { ...migrated(lsid, 2, [0]), incompleteHistory: true as const };
    expect(await apply([session])).toEqual([lsid]);
    expect(await apply([session])).toEqual([lsid]);
    expect(await recorded(lsid)).toEqual({ txnNumber: 2, stmtIds: [INCOMPLETE_HISTORY_STMT_ID, 0] });
    expect(await loaded(lsid)).toMatchObject({ txnNumber: 2, incompleteHistory: true });
    expect([...(await loaded(lsid))!.statements.keys()]).toEqual([0]);
  });

  it('a session here at a higher txnNumber keeps its own history and ignores the migrated one', async () => {
    const lsid = randomUUID();
    await write(lsid, 5, [50]);
    expect(await apply([migrated(lsid, 4, [0, 1])])).toEqual([]);
    expect(await recorded(lsid)).toEqual({ txnNumber: 5, stmtIds: [0] });
  });

  it('a session here at the same txnNumber adds the migrated statements to its own', async () => {
    const lsid = randomUUID();
    await write(lsid, 4, [50, 51], 2);
    expect(await apply([migrated(lsid, 4, [0, 1, 2])])).toEqual([lsid]);
    expect(await recorded(lsid)).toEqual({ txnNumber: 4, stmtIds: [0, 1, 2, 3] });
  });

  it('a session here at a lower txnNumber takes the migrated txnNumber and forgets its older statements and image', async () => {
    const lsid = randomUUID();
    await write(lsid, 1, [50, 51, 52]);
    await db.dataSource.transaction((manager) => store.recordImage(manager, lsid, 1, 'preImage', { _id: 1 }));
    expect(await apply([migrated(lsid, 2, [7])])).toEqual([lsid]);
    expect(await recorded(lsid)).toEqual({ txnNumber: 2, stmtIds: [7] });
    expect((await loaded(lsid))?.image).toBeUndefined();
  });

  it('applies a batch atomically: a malformed statement leaves no session of the batch', async () => {
    const good = randomUUID();
    const bad = { ...migrated(randomUUID(), 1, [0]), statements: [{ stmtId: 0, shardKey: '00', result: 'not json' }] };
    await expect(apply([migrated(good, 1, [0]), bad])).rejects.toThrow();
    expect(await recorded(good)).toEqual({ txnNumber: undefined, stmtIds: [] });
  });

  it('history read from one shard and applied on another answers the same retries', async () => {
    const lsid = randomUUID();
    await write(lsid, 9, [11, 30]);
    await db.dataSource.transaction((manager) => store.recordImage(manager, lsid, 9, 'postImage', { _id: 11, n: 2 }));
    const history = await historyIn(range(10, 20));
    const recipient = await createTestDatabase('shard', 2);
    try {
      await recipient.dataSource.transaction((manager) => store.applyMigratedSessions(manager, collectionUuid, history));
      const session = await loaded(lsid, recipient.dataSource.manager);
      expect([...session!.statements.keys()]).toEqual([0]);
      expect(session?.image).toEqual({ kind: 'postImage', document: { _id: 11, n: 2 } });
    } finally {
      await recipient.drop();
    }
  });
});
