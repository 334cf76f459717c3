import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestDatabase, createTestDatabase } from '../../../../test/pg/test-database.js';
import type { StatementResult } from '../documents/statement-history.js';
import { SessionCatalog } from './session-catalog.js';
import { SessionRecords } from './session-records.service.js';
import { TransactionsStore } from './transactions.store.js';

let db: TestDatabase;
let records: SessionRecords;
const store = new TransactionsStore();
const collectionUuid = randomUUID();

beforeAll(async () => {
  db = await createTestDatabase('shard');
  records = new SessionRecords(db.dataSource, store, new SessionCatalog(), pino({ level: 'silent' }));
});
afterAll(async () => db?.drop());

const updated: StatementResult = { op: 'update', n: 1, nModified: 1 };

/** Logs one command of `lsid` at `txnNumber` that executed `stmtIds`, as a write records it. */
function log(lsid: string, txnNumber: number, stmtIds: number[]) {
  const statements = stmtIds.map((stmtId) => ({ stmtId, shardKey: Buffer.from([stmtId]), result: updated }));
  return store.recordStatements(db.dataSource.manager, collectionUuid, [{ lsid, txnNumber, statements }]);
}

async function row(lsid: string) {
  const [r] = await db.dataSource.query(
    `SELECT txn_number::int AS "txnNumber", stmt_ids AS "stmtIds", encode(shard_keys[1], 'hex') AS "firstKey" FROM txn_records WHERE lsid = $1`,
    [lsid],
  );
  return r as { txnNumber: number; stmtIds: number[]; firstKey: string } | undefined;
}

describe('folding the record log', () => {
  it("joins the statements of a session's txnNumber across commands, and a newer txnNumber replaces them", async () => {
    const [a, b] = [randomUUID(), randomUUID()];
    await log(a, 1, [0]);
    await log(a, 1, [1, 2]);
    await log(b, 4, [0]);
    await log(b, 5, [3]);
    expect(await records.fold()).toBe(2);
    expect(await row(a)).toEqual({ txnNumber: 1, stmtIds: [0, 1, 2], firstKey: '00' });
    expect(await row(b)).toEqual({ txnNumber: 5, stmtIds: [3], firstKey: '03' });
    expect((await db.dataSource.query('SELECT count(*)::int AS n FROM txn_record_log'))[0].n).toBe(0);
  });

  it('adds to a folded row of the same txnNumber, and never takes a row back to an older one', async () => {
    const lsid = randomUUID();
    await log(lsid, 2, [0]);
    await records.fold();
    await log(lsid, 2, [1]);
    await records.fold();
    expect(await row(lsid)).toMatchObject({ txnNumber: 2, stmtIds: [0, 1] });
    await log(lsid, 1, [7]);
    await records.fold();
    expect(await row(lsid)).toMatchObject({ txnNumber: 2, stmtIds: [0, 1] });
  });

  it('a session loads with what is still in the log', async () => {
    const lsid = randomUUID();
    await log(lsid, 3, [0, 1]);
    const loaded = await records.load(lsid);
    expect(loaded?.txnNumber).toBe(3);
    expect([...loaded!.statements.entries()]).toEqual([
      [0, updated],
      [1, updated],
    ]);
  });

  it("a migration's history pull includes what is still in the log", async () => {
    const lsid = randomUUID();
    await log(lsid, 1, [2]);
    const range = { collectionUuid, min: Buffer.from([2]), max: Buffer.from([3]) };
    const pulled = await records.historyInRange(range, undefined, 1_000);
    expect(pulled.find((s) => s.lsid === lsid)?.statements).toEqual([{ stmtId: 2, shardKey: '02', result: JSON.stringify(updated) }]);
  });

  it('folds run one at a time: concurrent folds fold each row once', async () => {
    const lsid = randomUUID();
    await log(lsid, 1, [0]);
    await log(lsid, 1, [1]);
    const folded = await Promise.all([records.fold(), records.fold(), records.fold()]);
    expect(folded.reduce((sum, n) => sum + n, 0)).toBe(1);
    expect(await row(lsid)).toMatchObject({ txnNumber: 1, stmtIds: [0, 1] });
  });
});
