import { randomUUID } from 'node:crypto';
import { ObjectId } from 'bson';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type ClusterTimestamp, TesseraError, type ValueObject, compareClusterTimestamps, parseShardKeyPattern } from '@tessera/core';
import { type InternalClients, VectorClockService } from '@tessera/platform';
import type { DecisionAnswer, TransactionFields } from '@tessera/protocol';
import { type TestDatabase, createTestDatabase } from '../../../../test/pg/test-database.js';
import { testWriteTimes, writeTimeNow } from '../../../../test/fakes/write-times.js';
import { ownedRuntime } from '../../../../test/fakes/sharding-runtime.js';
import { CollectionStorageService, tableName } from '../collections/collection-storage.service.js';
import { CursorManager } from '../documents/cursor-manager.js';
import { type CollectionHandle, DocumentStore } from '../documents/document-store.js';
import { DocumentWrites } from '../documents/document-writes.js';
import { ShardClockStore } from '../history/shard-clock.store.js';
import { SnapshotHistory } from '../history/snapshot-history.service.js';
import { clusterTimeToSql } from '../history/write-time.js';
import type { WriteTimes } from '../history/write-times.service.js';
import type { ShardSettings } from '../shard.settings.js';
import type { ShardIdentityService } from '../identity/shard-identity.service.js';
import { CoordinatorStore } from './coordinator.store.js';
import { ParticipantStore, gidOf } from './participant.store.js';
import { PeerRecovery } from './peer-recovery.js';
import { TransactionReporter } from './transaction-reporter.js';
import { type TransactionStatement, TransactionParticipants } from './transaction-participants.service.js';
import { TransactionResolver } from './transaction-resolver.js';

/**
 * A shard as a transaction participant on its real Postgres: statements in one held transaction
 * at its snapshot, writes restamped with the decided commit time before PREPARE (so reads below
 * it see nothing of the transaction and reads at it see all of it), write conflicts, a prepared
 * transaction found and committed by a new process, abort, the reaper, and a participant that
 * asks its coordinator for a decision it did not get.
 */
const silent = pino({ level: 'silent' });
let db: TestDatabase;
let base: CollectionHandle;
let collectionUuid: string;
const writes = () => new DocumentWrites(db.dataSource, { now: () => new Date(), generateId: () => new ObjectId() });
const coordinator = { shard: 'shard9', url: 'http://coordinator.test:1' };
/** What the fake coordinator answers a participant's question. */
/** What the coordinator answers a participant's question; an error is thrown (its process refusing connections). */
let coordinatorAnswer: DecisionAnswer | Error = { decision: 'pending' };
/** The coordinator's database, where a participant finds the decision while the coordinator's process is down. */
let coordinatorDb: TestDatabase;
const started: TransactionParticipants[] = [];
const peerRecoveries: PeerRecovery[] = [];
const resolvers: TransactionResolver[] = [];
const ADMIT = { admit: true };
const histories: SnapshotHistory[] = [];

beforeAll(async () => {
  db = await createTestDatabase('shard');
  coordinatorDb = await createTestDatabase('shard');
  collectionUuid = randomUUID();
  const ns = `txn.items_${collectionUuid.slice(0, 8)}`;
  await new CollectionStorageService(db.dataSource).createCollection(collectionUuid, { ns, keyPattern: { k: 1 } });
  base = { ns, table: tableName(collectionUuid), pattern: parseShardKeyPattern({ k: 1 }), owns: () => true };
  await new DocumentStore(db.dataSource).insert(
    { ...base, writeTime: writeTimeNow() },
    [1, 2, 3, 4, 5].map((k) => ({ _id: k, k, v: 'a' })),
    { ordered: true, generateId: () => new ObjectId() },
  );
});

// A test that fails between PREPARE and its end leaves a prepared transaction holding its rows'
// locks: ended here, so that the next tests meet their own failures and not a 30 s wait for it.
afterEach(async () => {
  for (const database of [db, coordinatorDb]) {
    const left: Array<{ gid: string }> = await database.dataSource.query(
      'SELECT gid FROM pg_prepared_xacts WHERE database = current_database()',
    );
    for (const { gid } of left) await database.dataSource.query(`ROLLBACK PREPARED '${gid.replaceAll("'", "''")}'`);
  }
});

afterAll(async () => {
  for (const resolver of resolvers) resolver.onApplicationShutdown();
  for (const participants of started) await participants.onApplicationShutdown();
  for (const peers of peerRecoveries) await peers.onApplicationShutdown();
  for (const history of histories) history.onApplicationShutdown();
  await db?.drop();
  await coordinatorDb?.drop();
});

/** A participant as a shard process has it, over the test database; `clock` is the process's. */
async function startParticipants(
  overrides: Partial<ShardSettings> = {},
  runtime = ownedRuntime(),
): Promise<{
  participants: TransactionParticipants;
  writeTimes: WriteTimes;
  clock: VectorClockService;
  reporter: TransactionReporter;
  peers: PeerRecovery;
  resolver: TransactionResolver;
}> {
  const clock = new VectorClockService();
  clock.tickClusterTime();
  const settings = {
    TESSERA_DATABASE_URL: db.url,
    TESSERA_MIN_SNAPSHOT_HISTORY_WINDOW_SECS: 300,
    TESSERA_TRANSACTION_LIFETIME_LIMIT_SECS: 60,
    TESSERA_MAX_TRANSACTION_LOCK_REQUEST_TIMEOUT_MS: 5,
    TESSERA_TRANSACTION_OLDER_WAIT_MS: 1_000,
    TESSERA_TRANSACTION_POOL_SIZE: 4,
    TESSERA_TRANSACTION_RESOLVE_AFTER_MS: 60_000,
    TESSERA_DATABASE_URL_FOR_PEERS: '',
    ...overrides,
  } as ShardSettings;
  const writeTimes = testWriteTimes(clock);
  const history = new SnapshotHistory(new ShardClockStore(db.dataSource), writeTimes, clock, settings, silent);
  await history.onApplicationBootstrap();
  histories.push(history);
  const transactionDecision = async () => {
    if (coordinatorAnswer instanceof Error) throw coordinatorAnswer;
    return coordinatorAnswer;
  };
  const clients = { shard: () => ({ transactionDecision }) } as unknown as InternalClients;
  // Without an identity the reporter sends nothing: the decisions stay in `unsent`.
  const reporter = new TransactionReporter({ get: async () => null } as unknown as ShardIdentityService, clients, silent);
  const peers = new PeerRecovery(clients, reporter, settings, silent);
  const participants = new TransactionParticipants(
    new ParticipantStore(db.dataSource),
    writeTimes,
    history,
    clock,
    runtime,
    reporter,
    peers,
    settings,
    silent,
  );
  const resolver = new TransactionResolver(participants, peers, settings, silent);
  await participants.onModuleInit();
  await participants.onApplicationBootstrap();
  resolver.onApplicationBootstrap();
  started.push(participants);
  resolvers.push(resolver);
  peerRecoveries.push(peers);
  return { participants, writeTimes, clock, reporter, peers, resolver };
}

/** A new transaction's fields at the clock's current time. */
function newTransaction(clock: VectorClockService): TransactionFields {
  return { lsid: { id: randomUUID() }, txnNumber: 1, atClusterTime: clock.now().clusterTime, startTransaction: true };
}

/** Transactions prepared in the test database. */
async function preparedCount(): Promise<number> {
  const rows: Array<{ n: string }> = await db.dataSource.query(
    'SELECT count(*) AS n FROM pg_prepared_xacts WHERE database = current_database()',
  );
  return Number(rows[0]!.n);
}

/** The handle a statement runs with, as the shard's data service builds it. */
function handleOf(statement: TransactionStatement): CollectionHandle {
  return {
    ...base,
    indexes: [],
    snapshot: { collectionUuid, time: clusterTimeToSql(statement.atClusterTime) },
    writeTime: statement.writeTime,
    transaction: statement.work,
  };
}

async function findAt(time: ClusterTimestamp | undefined, filter: ValueObject = {}): Promise<unknown[]> {
  const handle = time === undefined ? base : { ...base, indexes: [], snapshot: { collectionUuid, time: clusterTimeToSql(time) } };
  return (await new CursorManager(db.dataSource).find(handle, { filter, batchSize: 1000 })).documents;
}

function before(time: ClusterTimestamp): ClusterTimestamp {
  return time.i > 0 ? { t: time.t, i: time.i - 1 } : { t: time.t - 1, i: 1_000_000 };
}

describe('a transaction participant', () => {
  it('makes the transaction visible at its commit time and not before, with its own writes seen inside', async () => {
    const { participants, writeTimes, clock } = await startParticipants();
    const fields = newTransaction(clock);
    await participants.statement(fields, ADMIT, (s) =>
      writes().update(handleOf(s), [{ q: { k: 1 }, u: { $set: { v: 'b' } }, multi: false, upsert: false }], true),
    );
    await participants.statement({ ...fields, startTransaction: false }, ADMIT, (s) =>
      writes().update(handleOf(s), [{ q: { k: 1 }, u: { $set: { v: 'c' } }, multi: false, upsert: false }], true),
    );
    const seen = await participants.statement(
      { ...fields, startTransaction: false },
      ADMIT,
      async (s) => (await new CursorManager(db.dataSource).find(handleOf(s), { filter: { k: { $lte: 2 } }, batchSize: 10 })).documents,
    );
    expect(seen).toEqual([
      { _id: 1, k: 1, v: 'c' },
      { _id: 2, k: 2, v: 'a' },
    ]);
    const { reservedTime } = await participants.reserveCommitTime(fields);
    const commitTime = { t: reservedTime.t, i: reservedTime.i + 5 };
    await participants.prepare({ lsid: fields.lsid, txnNumber: 1, commitTime, coordinator });
    // Prepared: a read at the commit time is held back until the transaction is resolved.
    let heldRead = false;
    const read = writeTimes.appliedThrough(commitTime).then(() => (heldRead = true));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(heldRead).toBe(false);
    await participants.commit({ lsid: fields.lsid, txnNumber: 1, commitTime });
    await read;
    expect(await findAt(before(commitTime), { k: 1 })).toEqual([{ _id: 1, k: 1, v: 'a' }]);
    expect(await findAt(commitTime, { k: 1 })).toEqual([{ _id: 1, k: 1, v: 'c' }]);
    // The intermediate version 'b' was never kept; the replaced one ends at the commit time.
    const kept: Array<{ doc: { v: string }; valid_to: string }> = await db.dataSource.query(
      'SELECT doc, valid_to FROM document_history WHERE collection_uuid = $1 ORDER BY valid_to',
      [collectionUuid],
    );
    expect(kept.map((k) => k.doc.v)).toEqual(['a']);
    expect(kept[0]!.valid_to).toBe(clusterTimeToSql(commitTime));
    // Committing again is answered from the session's record.
    expect(await participants.commit({ lsid: fields.lsid, txnNumber: 1, commitTime })).toEqual({ committed: true });
  });

  it('refuses a write to a document changed after the snapshot, or held by another transaction', async () => {
    const { participants, clock, reporter } = await startParticipants();
    const early = newTransaction(clock);
    await participants.statement(early, ADMIT, async () => undefined);
    const other = newTransaction(clock);
    await participants.statement(other, ADMIT, (s) =>
      writes().update(handleOf(s), [{ q: { k: 2 }, u: { $set: { v: 'x' } }, multi: false, upsert: false }], true),
    );
    // k: 2 is held by `other`: a conflict at once, which aborts `early`.
    await expect(
      participants.statement({ ...early, startTransaction: false }, ADMIT, (s) =>
        writes().update(handleOf(s), [{ q: { k: 2 }, u: { $set: { v: 'y' } }, multi: false, upsert: false }], true),
      ),
    ).rejects.toMatchObject({ code: 'WRITE_CONFLICT', errorLabels: ['TransientTransactionError'] });
    await participants.commit(other);
    expect(reporter.unsent).toEqual([
      expect.objectContaining({ lsid: early.lsid.id, decision: 'abort', by: 'participant', reason: 'WriteConflict' }),
      expect.objectContaining({ lsid: other.lsid.id, decision: 'commit', by: 'participant', commitTime: expect.anything() }),
    ]);
    // A transaction whose snapshot is before `other`'s commit conflicts on k: 2 too.
    const stale = { ...newTransaction(clock), atClusterTime: early.atClusterTime };
    await expect(
      participants.statement(stale, ADMIT, (s) =>
        writes().update(handleOf(s), [{ q: { k: 2 }, u: { $set: { v: 'z' } }, multi: false, upsert: false }], true),
      ),
    ).rejects.toMatchObject({ code: 'WRITE_CONFLICT' });
    expect(await findAt(undefined, { k: 2 })).toEqual([{ _id: 2, k: 2, v: 'x' }]);
  });

  it('is found prepared by a new process, holds its commit time and commits it', async () => {
    const first = await startParticipants();
    const fields = newTransaction(first.clock);
    await first.participants.statement(fields, ADMIT, (s) => writes().delete(handleOf(s), [{ q: { k: 3 }, limit: 1 }], true));
    const { reservedTime: commitTime } = await first.participants.reserveCommitTime(fields);
    await first.participants.prepare({ lsid: fields.lsid, txnNumber: 1, commitTime, coordinator });
    const second = await startParticipants();
    // The new process never hands out a time below the prepared commit time (its wall clock may
    // have passed it meanwhile).
    expect(compareClusterTimestamps(second.clock.now().clusterTime, commitTime)).toBeGreaterThanOrEqual(0);
    let heldRead = false;
    const read = second.writeTimes.appliedThrough(commitTime).then(() => (heldRead = true));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(heldRead).toBe(false);
    expect(await second.participants.prepare({ lsid: fields.lsid, txnNumber: 1, commitTime, coordinator })).toEqual({
      prepared: true,
      storage: db.url,
    });
    await second.participants.commit({ lsid: fields.lsid, txnNumber: 1, commitTime });
    await read;
    expect(await findAt(before(commitTime), { k: 3 })).toEqual([{ _id: 3, k: 3, v: 'a' }]);
    expect(await findAt(commitTime, { k: 3 })).toEqual([]);
  });

  it('holds what it wrote against migrations while prepared, and will not prepare what moved away', async () => {
    let owned = true;
    const runtime = ownedRuntime(() => owned);
    const { participants, clock } = await startParticipants({}, runtime);
    const kept = newTransaction(clock);
    await participants.statement(kept, ADMIT, (s) =>
      writes().update(handleOf(s), [{ q: { k: 4 }, u: { $set: { v: 'kept' } }, multi: false, upsert: false }], true),
    );
    const { reservedTime: commitTime } = await participants.reserveCommitTime(kept);
    await participants.prepare({ lsid: kept.lsid, txnNumber: 1, commitTime, coordinator });
    expect(runtime.openLeases).toBe(1);
    // Having voted, it refuses any abort but its coordinator's decision: a router's, the reaper's.
    await expect(participants.abort(kept)).rejects.toMatchObject({ code: 'PREPARED_TRANSACTION_IN_PROGRESS' });
    expect(runtime.openLeases).toBe(1);
    expect(await preparedCount()).toBe(1);
    await participants.abort({ ...kept, decided: true });
    expect(runtime.openLeases).toBe(0);
    expect(await preparedCount()).toBe(0);
    const moved = newTransaction(clock);
    await participants.statement(moved, ADMIT, (s) =>
      writes().update(handleOf(s), [{ q: { k: 4 }, u: { $set: { v: 'moved' } }, multi: false, upsert: false }], true),
    );
    owned = false;
    await participants.reserveCommitTime(moved);
    await expect(
      participants.prepare({ lsid: moved.lsid, txnNumber: 1, commitTime: clock.now().clusterTime, coordinator }),
    ).rejects.toMatchObject({
      code: 'STALE_CONFIG',
      errorLabels: ['TransientTransactionError'],
    });
    expect(runtime.openLeases).toBe(0);
    expect(await findAt(undefined, { k: 4 })).toEqual([{ _id: 4, k: 4, v: 'a' }]);
  });

  it('aborts: nothing stays, and a later statement finds no transaction', async () => {
    const { participants, clock } = await startParticipants();
    const fields = newTransaction(clock);
    await participants.statement(fields, ADMIT, (s) =>
      new DocumentStore(db.dataSource).insert(handleOf(s), [{ _id: 100, k: 100 }], { ordered: true, generateId: () => new ObjectId() }),
    );
    expect(await participants.abort(fields)).toEqual({ aborted: true });
    expect(await participants.abort(fields)).toEqual({ aborted: true });
    expect(await findAt(undefined, { k: 100 })).toEqual([]);
    await expect(participants.statement({ ...fields, startTransaction: false }, ADMIT, async () => undefined)).rejects.toMatchObject({
      code: 'NO_SUCH_TRANSACTION',
    });
  });

  it('aborts a transaction past its lifetime limit (the reaper), and reports that decision', async () => {
    const { participants, clock, reporter } = await startParticipants({ TESSERA_TRANSACTION_LIFETIME_LIMIT_SECS: 1 });
    const fields = newTransaction(clock);
    await participants.statement(fields, ADMIT, (s) =>
      writes().update(handleOf(s), [{ q: { k: 4 }, u: { $set: { v: 'old' } }, multi: false, upsert: false }], true),
    );
    await expect
      .poll(
        () =>
          participants.statement({ ...fields, startTransaction: false }, ADMIT, async () => 'open').catch((e: { code: string }) => e.code),
        { timeout: 10_000 },
      )
      .toBe('NO_SUCH_TRANSACTION');
    expect(await findAt(undefined, { k: 4 })).toEqual([{ _id: 4, k: 4, v: 'a' }]);
    expect(reporter.unsent).toEqual([
      expect.objectContaining({
        lsid: fields.lsid.id,
        txnNumber: 1,
        decision: 'abort',
        by: 'reaper',
        reason: expect.stringContaining('lifetime'),
      }),
    ]);
  });

  it('aborts a transaction that reserved a commit time and was never prepared, and holds reads no longer', async () => {
    const { participants, writeTimes, clock } = await startParticipants({ TESSERA_TRANSACTION_RESOLVE_AFTER_MS: 1 });
    const fields = newTransaction(clock);
    await participants.statement(fields, ADMIT, (s) =>
      writes().update(handleOf(s), [{ q: { k: 5 }, u: { $set: { v: 'abandoned' } }, multi: false, upsert: false }], true),
    );
    const { reservedTime } = await participants.reserveCommitTime(fields);
    await writeTimes.appliedThrough(reservedTime);
    await expect(participants.prepare({ lsid: fields.lsid, txnNumber: 1, commitTime: reservedTime, coordinator })).rejects.toMatchObject({
      code: 'NO_SUCH_TRANSACTION',
    });
    expect(await findAt(undefined, { k: 5 })).toEqual([{ _id: 5, k: 5, v: 'a' }]);
  });

  it("resolves a prepared transaction at an operator's request, by its coordinator's decision only", async () => {
    const { participants, clock, resolver } = await startParticipants();
    const fields = newTransaction(clock);
    await participants.statement(fields, ADMIT, (s) =>
      writes().update(handleOf(s), [{ q: { k: 1 }, u: { $set: { v: 'resolved' } }, multi: false, upsert: false }], true),
    );
    expect(await resolver.resolveNow(fields)).toEqual({ outcome: 'notPrepared' });
    const { reservedTime: commitTime } = await participants.reserveCommitTime(fields);
    await participants.prepare({ lsid: fields.lsid, txnNumber: 1, commitTime, coordinator });
    coordinatorAnswer = { decision: 'pending' };
    expect(await resolver.resolveNow(fields)).toEqual({ outcome: 'pending' });
    expect(await preparedCount()).toBe(1);
    coordinatorAnswer = { decision: 'commit', commitTime };
    expect(await resolver.resolveNow(fields)).toEqual({ outcome: 'commit' });
    expect(await findAt(undefined, { k: 1 })).toEqual([{ _id: 1, k: 1, v: 'resolved' }]);
    expect(await resolver.resolveNow(fields)).toEqual({ outcome: 'notHere' });
  });

  it('asks its coordinator for a decision it did not get, and applies it', async () => {
    const { participants, clock } = await startParticipants({ TESSERA_TRANSACTION_RESOLVE_AFTER_MS: 1 });
    const fields = newTransaction(clock);
    await participants.statement(fields, ADMIT, (s) =>
      writes().update(handleOf(s), [{ q: { k: 5 }, u: { $set: { v: 'decided' } }, multi: false, upsert: false }], true),
    );
    const { reservedTime: commitTime } = await participants.reserveCommitTime(fields);
    coordinatorAnswer = { decision: 'pending' };
    await participants.prepare({ lsid: fields.lsid, txnNumber: 1, commitTime, coordinator });
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(await findAt(undefined, { k: 5 })).toEqual([{ _id: 5, k: 5, v: 'a' }]);
    coordinatorAnswer = { decision: 'commit', commitTime };
    await expect.poll(() => findAt(undefined, { k: 5 }), { timeout: 10_000 }).toEqual([{ _id: 5, k: 5, v: 'decided' }]);
  });
});

describe("a coordinator's process that is down", () => {
  /** How a request to a process that is not listening fails. */
  const refused = () => new TesseraError('HOST_UNREACHABLE', `${coordinator.url}: ECONNREFUSED`, { cause: { code: 'ECONNREFUSED' } });
  const coordinators = () => new CoordinatorStore(coordinatorDb.dataSource);

  /** A transaction of `participants` prepared with the coordinator's database handed out, writing `v` into k. */
  async function preparedWrite(participants: TransactionParticipants, clock: VectorClockService, k: number, v: string) {
    const fields = newTransaction(clock);
    await participants.statement(fields, ADMIT, (s) =>
      writes().update(handleOf(s), [{ q: { k }, u: { $set: { v } }, multi: false, upsert: false }], true),
    );
    const { reservedTime: commitTime } = await participants.reserveCommitTime(fields);
    const id = { lsid: fields.lsid, txnNumber: 1 };
    await participants.prepare({ ...id, commitTime, coordinator, coordinatorStorage: coordinatorDb.url });
    return { id, commitTime };
  }

  it('has its recorded commit applied from its database', async () => {
    const { participants, clock } = await startParticipants({ TESSERA_TRANSACTION_RESOLVE_AFTER_MS: 1 });
    coordinatorAnswer = refused();
    const { id, commitTime } = await preparedWrite(participants, clock, 4, 'from its database');
    await coordinators().decide(id, [coordinator], { decision: 'commit', commitTime });
    await expect.poll(() => findAt(undefined, { k: 4 }), { timeout: 10_000 }).toEqual([{ _id: 4, k: 4, v: 'from its database' }]);
    expect(await preparedCount()).toBe(0);
  });

  it('is presumed to abort, recorded in its database, so that its own late commit meets the abort', async () => {
    const { participants, clock, reporter } = await startParticipants({ TESSERA_TRANSACTION_RESOLVE_AFTER_MS: 1 });
    coordinatorAnswer = refused();
    const { id, commitTime } = await preparedWrite(participants, clock, 4, 'never');
    await expect.poll(() => preparedCount(), { timeout: 10_000 }).toBe(0);
    expect(await findAt(undefined, { k: 4 })).toEqual([{ _id: 4, k: 4, v: 'from its database' }]);
    expect(await coordinators().decide(id, [coordinator], { decision: 'commit', commitTime })).toEqual({ decision: 'abort' });
    expect(reporter.unsent.some((d) => d.lsid === id.lsid.id && d.by === 'presumedAbort')).toBe(true);
  });

  it('waits for a coordinator that may have received the question (a timeout, not a refusal)', async () => {
    const { participants, clock } = await startParticipants({ TESSERA_TRANSACTION_RESOLVE_AFTER_MS: 1 });
    coordinatorAnswer = new Error('headers timeout');
    const { id, commitTime } = await preparedWrite(participants, clock, 2, 'later');
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(await preparedCount()).toBe(1);
    expect(await coordinators().find(id)).toBeUndefined();
    coordinatorAnswer = { decision: 'commit', commitTime };
    await expect.poll(() => preparedCount(), { timeout: 10_000 }).toBe(0);
  });

  it('has what it prepared in its own database ended there by a peer, and its clock restarts past that commit', async () => {
    const { peers } = await startParticipants();
    // Transactions the coordinator itself prepared as a participant, at a time far ahead of any clock here.
    const far = { t: Math.floor(Date.now() / 1000) + 3_600, i: 1 };
    const committed = { lsid: { id: randomUUID() }, txnNumber: 1 };
    const aborted = { lsid: { id: randomUUID() }, txnNumber: 1 };
    const store = new ParticipantStore(coordinatorDb.dataSource);
    for (const id of [committed, aborted]) {
      const runner = coordinatorDb.dataSource.createQueryRunner();
      await runner.connect();
      await runner.query('BEGIN');
      await runner.query(
        "INSERT INTO txn_records (lsid, txn_number, last_write_at, txn_state, commit_time) VALUES ($1, 1, now(), 'committed', $2)",
        [id.lsid.id, clusterTimeToSql(far)],
      );
      const database = coordinatorDb.url.slice(coordinatorDb.url.lastIndexOf('/') + 1);
      await runner.query(`PREPARE TRANSACTION '${gidOf(database, { id, commitTime: far, coordinator })}'`);
      await runner.release();
    }
    await coordinators().decide(committed, [coordinator], { decision: 'commit', commitTime: far });
    expect(await store.preparedTransactions()).toHaveLength(2);
    peers.recover({ ...coordinator, storage: coordinatorDb.url });
    await expect.poll(() => store.preparedTransactions(), { timeout: 10_000 }).toEqual([]);
    expect(await store.committedAt(committed)).toEqual(far);
    expect(await store.committedAt(aborted)).toBeUndefined();
    expect((await coordinators().find(aborted))?.decision).toEqual({ decision: 'abort' });
    // The coordinator's process, restarted, starts its clock past the commit a peer made for it.
    const clock = new VectorClockService();
    const restarted = new TransactionParticipants(
      store,
      testWriteTimes(clock),
      {} as SnapshotHistory,
      clock,
      ownedRuntime(),
      {} as TransactionReporter,
      peers,
      {} as ShardSettings,
      silent,
    );
    await restarted.onModuleInit();
    expect(clock.now().clusterTime).toEqual(far);
  });
});

describe('a wait cycle between two transactions (wait-die)', () => {
  it('costs the younger one only: the older waits for it, the younger dies with LockTimeout', async () => {
    const { participants, clock, reporter } = await startParticipants();
    const older = newTransaction(clock);
    clock.tickClusterTime();
    const younger = newTransaction(clock);
    const insert = (fields: TransactionFields, start: boolean, _id: string) =>
      participants.statement({ ...fields, startTransaction: start }, ADMIT, (s) =>
        new DocumentStore(db.dataSource).insert(handleOf(s), [{ _id, k: 100 }], { ordered: true, generateId: () => new ObjectId() }),
      );
    await insert(older, true, 'held by the older');
    await insert(younger, true, 'held by the younger');
    // Each now inserts the key the other holds: a cycle that Postgres would break by its own
    // deadlock detection (WriteConflict), and no single Postgres sees across shards.
    const olderWaits = insert(older, false, 'held by the younger');
    await new Promise((resolve) => setTimeout(resolve, 50));
    await expect(insert(younger, false, 'held by the older')).rejects.toMatchObject({
      code: 'LOCK_TIMEOUT',
      errorLabels: ['TransientTransactionError'],
    });
    await expect(olderWaits).resolves.toMatchObject({ insertedCount: 1, writeErrors: [] });
    await participants.commit(older);
    expect((await findAt(undefined, { k: 100 })).map((d) => (d as { _id: string })._id).sort()).toEqual([
      'held by the older',
      'held by the younger',
    ]);
    expect(reporter.unsent.filter((d) => d.decision === 'abort').map((d) => d.lsid)).toEqual([younger.lsid.id]);
  });
});

describe('a shard whose transaction connections are all held', () => {
  it('refuses a new transaction at once with TemporarilyUnavailable, a transient error', async () => {
    const { participants, clock } = await startParticipants({ TESSERA_TRANSACTION_POOL_SIZE: 1 });
    const held = newTransaction(clock);
    await participants.statement(held, ADMIT, async () => undefined);
    await expect(participants.statement(newTransaction(clock), ADMIT, async () => undefined)).rejects.toMatchObject({
      code: 'TEMPORARILY_UNAVAILABLE',
      errorLabels: ['TransientTransactionError'],
    });
    await participants.abort(held);
    await expect(participants.statement(newTransaction(clock), ADMIT, async () => 'began')).resolves.toBe('began');
  });
});
