import { randomUUID } from 'node:crypto';
import { ObjectId } from 'bson';
import pino from 'pino';
import type { EntityManager } from 'typeorm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseShardKeyPattern } from '@tessera/core';
import { type TestDatabase, createTestDatabase } from '../../../../test/pg/test-database.js';
import { CollectionStorageService, tableName } from '../collections/collection-storage.service.js';
import { type CollectionHandle, DocumentStore } from '../documents/document-store.js';
import { DocumentWrites } from '../documents/document-writes.js';
import type { DeleteStatement, FindAndModifyRequest, UpdateStatement } from '../documents/write-statements.js';
import type { StatementHistory, StatementResult } from '../documents/statement-history.js';
import type { RetryableWrite } from './retryable-write.js';
import { RetryableWriteService } from './retryable-write.service.js';
import { SessionCatalog } from './session-catalog.js';
import { SessionRecords } from './session-records.service.js';
import type { ShardSessions } from './shard-sessions.service.js';
import { type RecordingSql, type SessionRecordPart, TransactionsStore } from './transactions.store.js';
import { writeTimeNow } from '../../../../test/fakes/write-times.js';

let db: TestDatabase;
let handle: CollectionHandle;
let collectionUuid: string;
let documents: DocumentStore;
let writes: DocumentWrites;
let retryable: RetryableWriteService;
/** The stored history `retryable` uses; its folds fold every process's records. */
let records: SessionRecords;
const logger = pino({ level: 'silent' });
const generateId = () => new ObjectId();
/** What the service told the node's session cache: sessions used, retries answered from history. */
const sessionNotes = { used: [] as string[], retried: [] as string[] };
const sessions = {
  use: (lsid: string) => void sessionNotes.used.push(lsid),
  noteRetryAnswered: (lsid: string) => void sessionNotes.retried.push(lsid),
} as unknown as ShardSessions;

/** A shard process's retryable writes with its own session catalog (a new one is a restarted process). */
function aProcess(store = new TransactionsStore()): { service: RetryableWriteService; records: SessionRecords } {
  const catalog = new SessionCatalog();
  const records = new SessionRecords(db.dataSource, store, catalog, logger);
  return { service: new RetryableWriteService(catalog, store, records, sessions), records };
}

beforeAll(async () => {
  db = await createTestDatabase('shard');
  documents = new DocumentStore(db.dataSource);
  writes = new DocumentWrites(db.dataSource, { now: () => new Date('2026-11-23T10:00:00Z'), generateId });
  ({ service: retryable, records } = aProcess());
});
afterAll(async () => db?.drop());

beforeEach(async () => {
  collectionUuid = randomUUID();
  const ns = `shop.items_${collectionUuid.slice(0, 8)}`;
  await new CollectionStorageService(db.dataSource).createCollection(collectionUuid, { ns, keyPattern: { sku: 1 } });
  handle = { ns, table: tableName(collectionUuid), pattern: parseShardKeyPattern({ sku: 1 }), owns: () => true, writeTime: writeTimeNow() };
  await documents.insert(
    handle,
    [
      { _id: 1, sku: 'a', qty: 5 },
      { _id: 2, sku: 'b', qty: 0 },
      { _id: 3, sku: 'c', qty: 5 },
    ],
    { ordered: true, generateId },
  );
});

/** A retryable write on a fresh session unless `lsid` is given. */
function retryableWrite(txnNumber: number, stmtIds: number[], lsid: string = randomUUID()): RetryableWrite {
  return { lsid, txnNumber, stmtIds };
}
const indexes = (n: number) => Array.from({ length: n }, (_, i) => i);

function insert(write: RetryableWrite, docs: unknown[], ordered = true, service = retryable) {
  return service.run(write, collectionUuid, (history) => documents.insert(handle, docs, { ordered, generateId, history }));
}
function update(write: RetryableWrite, statements: UpdateStatement[], service = retryable) {
  return service.run(write, collectionUuid, (history) => writes.update(handle, statements, true, history));
}
function remove(write: RetryableWrite, statements: DeleteStatement[]) {
  return retryable.run(write, collectionUuid, (history) => writes.delete(handle, statements, true, history));
}
function findAndModify(write: RetryableWrite, request: FindAndModifyRequest) {
  return retryable.run(write, collectionUuid, (history) => writes.findAndModify(handle, request, history));
}

async function stored(): Promise<Array<Record<string, unknown>>> {
  return (await db.dataSource.query(`SELECT doc FROM ${handle.table} ORDER BY id`)).map((r: { doc: Record<string, unknown> }) => r.doc);
}
async function recordedStmtIds(lsid: string): Promise<Array<[number, number]>> {
  await records.fold();
  const rows: Array<{ txn_number: string; stmt_id: number }> = await db.dataSource.query(
    'SELECT txn_number, stmt_id FROM txn_records, unnest(stmt_ids) AS stmt_id WHERE lsid = $1 ORDER BY txn_number, stmt_id',
    [lsid],
  );
  return rows.map((r) => [Number(r.txn_number), r.stmt_id]);
}

const items = (from: number, to: number) => indexes(to - from).map((i) => ({ _id: 100 + from + i, sku: `n${from + i}` }));

describe('retried inserts', () => {
  it('a retried batch inserts nothing twice and answers the same inserted indexes, listing them as retried', async () => {
    const write = retryableWrite(1, indexes(4));
    const first = await insert(write, items(0, 4));
    const retry = await insert(write, items(0, 4));
    expect(first).toEqual({ insertedCount: 4, inserted: [0, 1, 2, 3], writeErrors: [] });
    expect(retry).toEqual({ insertedCount: 4, inserted: [0, 1, 2, 3], writeErrors: [], retriedStmtIds: [0, 1, 2, 3] });
    expect(await stored()).toHaveLength(7);
    // The session cache learns both uses, and the retry answered from history (once).
    expect(sessionNotes.used.filter((id) => id === write.lsid)).toHaveLength(2);
    expect(sessionNotes.retried.filter((id) => id === write.lsid)).toHaveLength(1);
  });

  it('a batch whose first half ran runs only the rest', async () => {
    const lsid = randomUUID();
    await insert(retryableWrite(1, indexes(5), lsid), items(0, 5));
    const whole = await insert(retryableWrite(1, indexes(10), lsid), items(0, 10));
    expect(whole).toEqual({ insertedCount: 10, inserted: indexes(10), writeErrors: [], retriedStmtIds: indexes(5) });
    expect(await stored()).toHaveLength(13);
    expect(await recordedStmtIds(lsid)).toEqual(indexes(10).map((i) => [1, i]));
  });

  it('a batch meeting a duplicate key records only what it stored, and its retry answers the same', async () => {
    const write = retryableWrite(1, [10, 11, 12]);
    const docs = [
      { _id: 50, sku: 'x' },
      { _id: 1, sku: 'dup' },
      { _id: 51, sku: 'y' },
    ];
    const first = await insert(write, docs, false);
    const retry = await insert(write, docs, false);
    expect(first.inserted).toEqual([0, 2]);
    expect(first.writeErrors.map((e) => [e.index, e.error.code])).toEqual([[1, 'DUPLICATE_KEY']]);
    expect(retry).toEqual({ ...first, retriedStmtIds: [10, 12] });
    expect(await recordedStmtIds(write.lsid)).toEqual([
      [1, 10],
      [1, 12],
    ]);
  });
});

describe('retried updates and deletes', () => {
  it('a retried $inc applies once and answers the same counts', async () => {
    const write = retryableWrite(1, [0]);
    const statement = { q: { _id: 1 }, u: { $inc: { qty: 1 } }, multi: false, upsert: false };
    const first = await update(write, [statement]);
    const retry = await update(write, [statement]);
    expect(first).toEqual({ matchedCount: 1, modifiedCount: 1, upserted: [], writeErrors: [] });
    expect(retry).toEqual({ ...first, retriedStmtIds: [0] });
    expect((await stored()).find((d) => d._id === 1)?.qty).toBe(6);
  });

  it('a retried upsert inserts one document and answers the same upserted _id', async () => {
    const write = retryableWrite(1, [0]);
    const statement = { q: { sku: 'new' }, u: { $inc: { qty: 1 } }, multi: false, upsert: true };
    const first = await update(write, [statement]);
    const retry = await update(write, [statement]);
    expect(first.upserted).toHaveLength(1);
    expect(retry).toEqual({ ...first, retriedStmtIds: [0] });
    expect((await stored()).filter((d) => d.sku === 'new')).toEqual([{ _id: first.upserted[0]!._id, sku: 'new', qty: 1 }]);
  });

  it('a retried delete removes no other document and answers the same count', async () => {
    const write = retryableWrite(1, [0]);
    const first = await remove(write, [{ q: { qty: 5 }, limit: 1 }]);
    const retry = await remove(write, [{ q: { qty: 5 }, limit: 1 }]);
    expect(first).toEqual({ deletedCount: 1, writeErrors: [] });
    expect(retry).toEqual({ deletedCount: 1, writeErrors: [], retriedStmtIds: [0] });
    expect(await stored()).toHaveLength(2);
  });
});

describe('retried findAndModify', () => {
  it('answers the same pre-image without applying the update again', async () => {
    const write = retryableWrite(1, [0]);
    const request = { query: { qty: 5 }, sort: { sku: -1 }, update: { $inc: { qty: 10 } }, remove: false, new: false, upsert: false };
    const first = await findAndModify(write, request);
    const retry = await findAndModify(write, request);
    expect(first).toEqual({ value: { _id: 3, sku: 'c', qty: 5 }, lastErrorObject: { n: 1, updatedExisting: true } });
    expect(retry).toEqual({ ...first, retriedStmtIds: [0] });
    expect((await stored()).find((d) => d._id === 3)?.qty).toBe(15);
  });

  it('answers the same post-image, under the retry projection', async () => {
    const write = retryableWrite(1, [0]);
    const request = { query: { _id: 2 }, update: { $inc: { qty: 1 } }, remove: false, new: true, upsert: false };
    const first = await findAndModify(write, request);
    const retry = await findAndModify(write, { ...request, fields: { qty: 1 } });
    expect(first.value).toEqual({ _id: 2, sku: 'b', qty: 1 });
    expect(retry).toEqual({ value: { _id: 2, qty: 1 }, lastErrorObject: first.lastErrorObject, retriedStmtIds: [0] });
  });

  it('answers the same removed document and upserted _id', async () => {
    const removal = retryableWrite(1, [0]);
    const removeRequest = { query: { _id: 1 }, remove: true, new: false, upsert: false };
    expect(await findAndModify(removal, removeRequest)).toMatchObject({ value: { _id: 1 } });
    expect(await findAndModify(removal, removeRequest)).toMatchObject({ value: { _id: 1 }, retriedStmtIds: [0] });
    const upsert = retryableWrite(1, [0]);
    const upsertRequest = { query: { sku: 'u' }, update: { $set: { qty: 1 } }, remove: false, new: false, upsert: true };
    const first = await findAndModify(upsert, upsertRequest);
    expect(first.value).toBeNull();
    expect(await findAndModify(upsert, upsertRequest)).toEqual({ ...first, retriedStmtIds: [0] });
    expect((await stored()).filter((d) => d.sku === 'u')).toHaveLength(1);
  });
});

describe('txnNumbers', () => {
  it('refuse a txnNumber lower than the session started, changing nothing', async () => {
    const lsid = randomUUID();
    await insert(retryableWrite(5, [0], lsid), items(0, 1));
    await expect(insert(retryableWrite(4, [0], lsid), items(1, 2))).rejects.toMatchObject({
      code: 'TRANSACTION_TOO_OLD',
      message: `Retryable write with txnNumber 4 is prohibited on session ${lsid} because a newer retryable write with txnNumber 5 has already started on this session.`,
    });
    expect(await stored()).toHaveLength(4);
  });

  it('a higher txnNumber forgets the older statements and runs its own', async () => {
    const lsid = randomUUID();
    await findAndModify(retryableWrite(1, [0], lsid), {
      query: { _id: 2 },
      update: { $inc: { qty: 1 } },
      remove: false,
      new: true,
      upsert: false,
    });
    const statement = { q: { _id: 2 }, u: { $inc: { qty: 1 } }, multi: false, upsert: false };
    expect(await update(retryableWrite(2, [0], lsid), [statement])).toEqual({
      matchedCount: 1,
      modifiedCount: 1,
      upserted: [],
      writeErrors: [],
    });
    expect((await stored()).find((d) => d._id === 2)?.qty).toBe(2);
    expect(await recordedStmtIds(lsid)).toEqual([[2, 0]]);
    // The older txnNumber's image stays until the session's next findAndModify or its reap, never answered.
    expect((await records.load(lsid))?.image).toBeUndefined();
  });
});

/** A store whose record fails after the write ran, inside the write's transaction or statement. */
class FailingRecordStore extends TransactionsStore {
  override async recordStatements(manager: EntityManager, uuid: string, parts: readonly SessionRecordPart[]): Promise<void> {
    await super.recordStatements(manager, uuid, parts);
    throw new Error('injected failure after the record');
  }

  override recording(first: number, uuid: string, parts: readonly SessionRecordPart[]): RecordingSql {
    const recording = super.recording(first, uuid, parts);
    return { ...recording, shape: 'failing', check: `${recording.check} AND txn_expect(false, 'injected failure after the record')` };
  }
}

/** A store whose first record fails as FailingRecordStore's do, counting the sessions it loads. */
class FailingOnceStore extends TransactionsStore {
  loads = 0;
  private failed = false;

  override async loadSession(manager: EntityManager, lsid: string) {
    this.loads++;
    return super.loadSession(manager, lsid);
  }

  override async recordStatements(manager: EntityManager, uuid: string, parts: readonly SessionRecordPart[]): Promise<void> {
    await super.recordStatements(manager, uuid, parts);
    if (this.failed) return;
    this.failed = true;
    throw new Error('injected failure after the record');
  }
}

describe('the write and its record commit together', () => {
  const failing = () => aProcess(new FailingRecordStore()).service;

  it('an insert whose record fails leaves neither documents nor record', async () => {
    const write = retryableWrite(1, indexes(2));
    await expect(insert(write, items(0, 2), true, failing())).rejects.toThrow('injected failure');
    expect(await stored()).toHaveLength(3);
    expect(await recordedStmtIds(write.lsid)).toEqual([]);
    expect(await insert(write, items(0, 2))).toEqual({ insertedCount: 2, inserted: [0, 1], writeErrors: [] });
  });

  it('an update whose record fails is a write error that left neither change nor record', async () => {
    const write = retryableWrite(1, [0]);
    const statement = { q: { _id: 1 }, u: { $inc: { qty: 1 } }, multi: false, upsert: false };
    expect((await update(write, [statement], failing())).writeErrors.map((e) => e.error.code)).toEqual(['INTERNAL']);
    expect((await stored()).find((d) => d._id === 1)?.qty).toBe(5);
    expect(await recordedStmtIds(write.lsid)).toEqual([]);
    expect(await update(write, [statement])).toMatchObject({ matchedCount: 1, modifiedCount: 1 });
  });

  it('a process whose record failed reloads the session at its next command, since the outcome may be unknown', async () => {
    const store = new FailingOnceStore();
    const { service } = aProcess(store);
    const write = retryableWrite(1, [0]);
    const statement = { q: { _id: 1 }, u: { $inc: { qty: 1 } }, multi: false, upsert: false };
    expect((await update(write, [statement], service)).writeErrors).toHaveLength(1);
    expect(await update(write, [statement], service)).toMatchObject({ matchedCount: 1, modifiedCount: 1, writeErrors: [] });
    expect(store.loads).toBe(2);
  });
});

describe('session checkout', () => {
  it('a second request on a session waits for the first to finish', async () => {
    const lsid = randomUUID();
    const events: string[] = [];
    let finishFirst!: () => void;
    const firstMayFinish = new Promise<void>((resolve) => (finishFirst = resolve));
    const first = retryable.run(retryableWrite(1, [0], lsid), collectionUuid, async (history?: StatementHistory) => {
      events.push('first starts');
      await firstMayFinish;
      events.push('first ends');
      return documents.insert(handle, items(0, 1), { ordered: true, generateId, history });
    });
    const second = retryable.run(retryableWrite(1, [0], lsid), collectionUuid, async (history?: StatementHistory) => {
      events.push('second starts');
      return documents.insert(handle, items(0, 1), { ordered: true, generateId, history });
    });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(events).toEqual(['first starts']);
    finishFirst();
    const [a, b] = await Promise.all([first, second]);
    expect(events).toEqual(['first starts', 'first ends', 'second starts']);
    expect(a).toEqual({ insertedCount: 1, inserted: [0], writeErrors: [] });
    expect(b).toEqual({ ...a, retriedStmtIds: [0] });
  });

  it('concurrent retries of one $inc apply it once', async () => {
    const write = retryableWrite(1, [0]);
    const statement = { q: { _id: 3 }, u: { $inc: { qty: 1 } }, multi: false, upsert: false };
    const answers = await Promise.all(indexes(4).map(() => update(write, [statement])));
    expect(answers.filter((a) => a.retriedStmtIds === undefined)).toHaveLength(1);
    expect(answers.every((a) => a.matchedCount === 1 && a.modifiedCount === 1)).toBe(true);
    expect((await stored()).find((d) => d._id === 3)?.qty).toBe(6);
  });
});

describe('ordinary writes', () => {
  it('record nothing', async () => {
    const before = await db.dataSource.query('SELECT count(*)::int AS n FROM txn_records');
    await retryable.run(undefined, collectionUuid, (history) =>
      documents.insert(handle, items(0, 2), { ordered: true, generateId, history }),
    );
    expect(await db.dataSource.query('SELECT count(*)::int AS n FROM txn_records')).toEqual(before);
  });
});

describe('a command of several sessions (coalesced inserts)', () => {
  const insertParts = (parts: RetryableWrite[], docs: unknown[]) =>
    retryable.runParts(parts, collectionUuid, (history) => documents.insert(handle, docs, { ordered: false, generateId, history }));

  it('records each part under its session, and a retry answers each from its own history', async () => {
    const parts = [retryableWrite(1, [0]), retryableWrite(7, [3, 4]), retryableWrite(2, [0])];
    const first = await insertParts(parts, items(0, 4));
    expect(first).toEqual({ result: { insertedCount: 4, inserted: [0, 1, 2, 3], writeErrors: [] }, retried: [[], [], []] });
    expect(await recordedStmtIds(parts[1]!.lsid)).toEqual([
      [7, 3],
      [7, 4],
    ]);
    // The second part again, with a new session after it: only the new one inserts.
    const again = await insertParts([parts[1]!, retryableWrite(1, [0])], [...items(1, 3), { _id: 200, sku: 'new' }]);
    expect(again).toEqual({ result: { insertedCount: 3, inserted: [0, 1, 2], writeErrors: [] }, retried: [[3, 4], []] });
    expect(await stored()).toHaveLength(8);
  });

  it('a part of an older txnNumber fails the command naming the part, and nothing runs', async () => {
    const old = retryableWrite(5, [0]);
    await insertParts([old], items(0, 1));
    const refused = insertParts([retryableWrite(1, [0]), { ...old, txnNumber: 4 }], items(1, 3));
    await expect(refused).rejects.toMatchObject({ code: 'TRANSACTION_TOO_OLD', details: { part: 1, activeTxnNumber: 5 } });
    expect(await stored()).toHaveLength(4);
  });
});

/**
 * Applies, as a migration does, history of `write`'s session at its txnNumber: statement
 * `stmtId` wrote the document matching `where` and answered `result`.
 */
async function applyMigratedHistory(
  write: RetryableWrite,
  stmtId: number,
  where: string,
  result: StatementResult,
  incompleteHistory?: true,
): Promise<void> {
  const [shardKey] = await db.dataSource.query(`SELECT encode(shard_key, 'hex') AS hex FROM ${handle.table} WHERE ${where}`);
  const statement = { stmtId, shardKey: shardKey.hex, result: JSON.stringify(result) };
  const session = { lsid: write.lsid, txnNumber: write.txnNumber, lastWriteAt: new Date().toISOString(), statements: [statement] };
  await records.applyMigrated(collectionUuid, [{ ...session, ...(incompleteHistory ? { incompleteHistory } : {}) }]);
}

describe('history changed while the process knows its sessions', () => {
  it("migrated history waits for the session's operation under way, and the next command answers from it", async () => {
    const write = retryableWrite(1, [0, 1]);
    const docs = items(0, 2);
    await insert({ ...write, stmtIds: [0] }, docs.slice(0, 1));
    let finish!: () => void;
    const mayFinish = new Promise<void>((resolve) => (finish = resolve));
    const running = retryable.run({ ...write, stmtIds: [0] }, collectionUuid, async (history) => {
      await mayFinish;
      return documents.insert(handle, docs.slice(0, 1), { ordered: true, generateId, history });
    });
    const applying = applyMigratedHistory(write, 1, "doc->>'sku' = 'n0'", { op: 'insert' });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await recordedStmtIds(write.lsid)).toEqual([[1, 0]]);
    finish();
    await Promise.all([running, applying]);
    expect(await recordedStmtIds(write.lsid)).toEqual([
      [1, 0],
      [1, 1],
    ]);
    expect(await insert(write, docs)).toEqual({ insertedCount: 2, inserted: [0, 1], writeErrors: [], retriedStmtIds: [0, 1] });
    expect(await stored()).toHaveLength(4);
  });

  it('an update after migrated history answers the migrated statement from it', async () => {
    const write = retryableWrite(1, [0, 1]);
    const statement = (id: number) => ({ q: { _id: id }, u: { $inc: { qty: 1 } }, multi: false, upsert: false });
    await update({ ...write, stmtIds: [0] }, [statement(1)]);
    await applyMigratedHistory(write, 1, "doc->>'_id' = '2'", { op: 'update', n: 1, nModified: 1 });
    const answer = await update(write, [statement(1), statement(2)]);
    expect(answer).toEqual({ matchedCount: 2, modifiedCount: 2, upserted: [], writeErrors: [], retriedStmtIds: [0, 1] });
    expect((await stored()).map((d) => d.qty)).toEqual([6, 0, 5]);
  });

  it('a restarted process answers a retry from history still in the record log', async () => {
    const write = retryableWrite(3, [0]);
    const statement = { q: { _id: 3 }, u: { $inc: { qty: 1 } }, multi: false, upsert: false };
    await update(write, [statement]);
    expect((await db.dataSource.query('SELECT count(*)::int AS n FROM txn_record_log'))[0].n).toBeGreaterThan(0);
    const restarted = aProcess().service;
    expect(await update(write, [statement], restarted)).toMatchObject({ matchedCount: 1, modifiedCount: 1, retriedStmtIds: [0] });
    expect((await stored()).find((d) => d._id === 3)?.qty).toBe(6);
  });
});

describe('history migrated in incomplete', () => {
  it('answers the statements it has, and refuses to run again one it may have missed (IncompleteTransactionHistory)', async () => {
    const write = retryableWrite(4, [0, 1]);
    await applyMigratedHistory(write, 0, "doc->>'_id' = '1'", { op: 'update', n: 1, nModified: 1 }, true);
    const statement = (id: number) => ({ q: { _id: id }, u: { $inc: { qty: 1 } }, multi: false, upsert: false });
    const retry = await update(write, [statement(1), statement(2)]);
    expect(retry).toMatchObject({ matchedCount: 1, modifiedCount: 1, retriedStmtIds: [0] });
    expect(retry.writeErrors.map((e) => [e.index, e.error.code])).toEqual([[1, 'INCOMPLETE_TRANSACTION_HISTORY']]);
    expect((await stored()).map((d) => d.qty)).toEqual([5, 0, 5]);
    // A new txnNumber starts with whole history.
    expect(await update(retryableWrite(5, [0], write.lsid), [statement(2)])).toMatchObject({ matchedCount: 1, writeErrors: [] });
  });
});
