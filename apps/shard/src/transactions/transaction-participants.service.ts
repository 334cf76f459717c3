import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import type { Logger } from 'pino';
import { DataSource } from 'typeorm';
import { type ClusterTimestamp, ERROR_CODES, IGNORED_VERSION, TesseraError, compareClusterTimestamps } from '@tessera/core';
import {
  type AbortTransaction,
  type CommitTransaction,
  type ParticipantTransaction,
  type PrepareTransaction,
  type PrepareVote,
  type TransactionFields,
  type TransactionId,
  type WriteErrorEntry,
} from '@tessera/protocol';
import { LOGGER, type Periodic, SETTINGS, VectorClockService, runPeriodically } from '@tessera/platform';
import type { TransactionWork } from '../documents/document-store.js';
import { SnapshotHistory } from '../history/snapshot-history.service.js';
import { WriteTimes } from '../history/write-times.service.js';
import type { ShardSettings } from '../shard.settings.js';
import { ShardingRuntime } from '../sharding/sharding-runtime.service.js';
import { OpenTransaction, transactionKey } from './open-transaction.js';
import { ParticipantStore, type PreparedTransaction } from './participant.store.js';
import { PeerRecovery } from './peer-recovery.js';
import { transientInTransaction } from './transaction-errors.js';
import { type DecidedBy, TransactionReporter } from './transaction-reporter.js';
import { WaitDie } from './wait-die.js';

const REAP_INTERVAL_MS = 1_000;
/**
 * How long a new transaction waits for one of the pool's connections. Open transactions hold them
 * until they end, so a full pool (clients that left transactions open) fails new ones quickly,
 * with a transient error, instead of queueing them to the router's request timeout.
 */
const CONNECTION_WAIT_MS = 2_000;
/** How long a session's new transaction waits for the decision of its prepared previous one. */
const PREPARED_WAIT_MS = 5_000;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/** What a transaction's statement runs with on this shard. */
export interface TransactionStatement {
  atClusterTime: ClusterTimestamp;
  /** The snapshot as the write time a statement stamps its writes with until commit. */
  writeTime: OpenTransaction['snapshot'];
  work: TransactionWork;
}

/**
 * A shard as a transaction participant (sharding-internals.md, "Transactions"): one Postgres
 * transaction per (lsid, txnNumber), held across requests, reading at the transaction's
 * snapshot; then MongoDB's phases, one method each: reserve a commit time, prepare, commit,
 * abort. A prepared transaction survives a kill: at start every prepared transaction is found
 * again and holds reads after its commit time back until `TransactionResolver` has its
 * coordinator's decision applied, as for one left prepared too long. The reaper aborts
 * transactions older than transactionLifetimeLimitSeconds that are not yet committing, and
 * reservations never followed by a prepare.
 */
@Injectable()
export class TransactionParticipants implements OnModuleInit, OnApplicationBootstrap, OnApplicationShutdown {
  private readonly open = new Map<string, OpenTransaction>();
  private readonly waitDie: WaitDie;
  /** Prepared transactions found at start, with the hold on their commit time. */
  private readonly recovered = new Map<string, { prepared: PreparedTransaction; release: () => void }>();
  private pool: DataSource | undefined;
  private loops: Periodic[] = [];

  constructor(
    private readonly store: ParticipantStore,
    private readonly writeTimes: WriteTimes,
    private readonly history: SnapshotHistory,
    private readonly clock: VectorClockService,
    private readonly runtime: ShardingRuntime,
    private readonly reporter: TransactionReporter,
    private readonly peers: PeerRecovery,
    @Inject(SETTINGS) private readonly settings: ShardSettings,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {
    this.waitDie = new WaitDie(store, this.open, settings.TESSERA_MAX_TRANSACTION_LOCK_REQUEST_TIMEOUT_MS);
  }

  /** Finds the prepared transactions a previous process left, before any write takes a time. */
  async onModuleInit(): Promise<void> {
    for (const prepared of await this.store.preparedTransactions()) {
      this.clock.advance({ clusterTime: prepared.commitTime });
      this.recovered.set(transactionKey(prepared.id), { prepared, release: this.writeTimes.hold(prepared.commitTime) });
    }
    // After the list: what a peer committed here while this process was down, even meanwhile.
    const latest = await this.store.latestCommitTime();
    if (latest !== undefined) this.clock.advance({ clusterTime: latest });
    if (this.recovered.size > 0)
      this.logger.warn({ prepared: this.recovered.size }, 'found prepared transactions; asking their coordinators');
  }

  async onApplicationBootstrap(): Promise<void> {
    // Statements hold a connection for the transaction's life: they get a pool of their own, so
    // that open transactions never starve the shard's other work.
    this.pool = new DataSource({
      type: 'postgres',
      url: this.settings.TESSERA_DATABASE_URL,
      extra: { max: this.settings.TESSERA_TRANSACTION_POOL_SIZE, connectionTimeoutMillis: CONNECTION_WAIT_MS },
      logging: false,
    });
    await this.pool.initialize();
    const onError = (error: unknown) => this.logger.warn({ err: error }, 'transaction housekeeping failed; retrying');
    this.loops = [runPeriodically(() => this.reap(), REAP_INTERVAL_MS, onError)];
  }

  async onApplicationShutdown(): Promise<void> {
    for (const loop of this.loops) loop.stop();
    await Promise.all([...this.open.values()].filter((t) => t.state !== 'prepared').map((t) => this.rollback(t).catch(() => undefined)));
    await this.pool?.destroy();
  }

  /**
   * Runs one statement of a transaction. The first one (`startTransaction`) opens it, once every
   * write up to its snapshot has ended here (`admit`; false only for a test-only failpoint). A
   * statement that fails, or answers a write error, aborts the transaction: its Postgres
   * transaction cannot go on after a failed statement.
   */
  async statement<T>(
    fields: TransactionFields,
    options: { admit: boolean },
    run: (statement: TransactionStatement) => Promise<T>,
  ): Promise<T> {
    const transaction = fields.startTransaction ? await this.begin(fields, options.admit) : this.inProgress(fields);
    return transaction.serially(async () => {
      if (this.open.get(transactionKey(transaction.id)) !== transaction || transaction.state !== 'inProgress') {
        throw noSuchTransaction(transaction.id, 'it was aborted while this statement waited');
      }
      let result: T;
      try {
        result = await this.waitDie.guard(transaction, () =>
          run({ atClusterTime: transaction.atClusterTime, writeTime: transaction.snapshot, work: transaction.work() }),
        );
      } catch (error) {
        // Not a failure: the router moves the document to its new owner in this transaction.
        // Nothing was written (the check comes before the UPDATE), so the transaction goes on.
        if (error instanceof TesseraError && error.code === 'WOULD_CHANGE_OWNING_SHARD') throw error;
        await this.abortOpen(transaction, { by: 'participant', reason: reasonOf(error) });
        throw transientInTransaction(error);
      }
      const writeError = firstWriteError(result);
      if (writeError !== undefined) {
        await this.abortOpen(transaction, { by: 'participant', reason: ERROR_CODES[writeError.error.code].codeName });
        throw transientInTransaction(TesseraError.fromEnvelope(writeError.error));
      }
      return result;
    });
  }

  /** The transactions open or prepared here, for operators. */
  describe(): ParticipantTransaction[] {
    const open = [...this.open.values()].map((t): ParticipantTransaction => ({
      lsid: t.id.lsid.id,
      txnNumber: t.id.txnNumber,
      state: t.state,
      startedAt: new Date(t.startedAt).toISOString(),
      coordinator: t.prepared?.coordinator.shard ?? null,
      namespaces: [...new Set(t.writtenDocuments().map((w) => w.ns))],
    }));
    const recovered = [...this.recovered.values()].map(({ prepared }): ParticipantTransaction => ({
      lsid: prepared.id.lsid.id,
      txnNumber: prepared.id.txnNumber,
      state: 'recovered',
      startedAt: null,
      coordinator: prepared.coordinator.shard,
      namespaces: [],
    }));
    return [...open, ...recovered];
  }

  /** The first phase: a commit time this shard can take, held in flight until the transaction ends. */
  async reserveCommitTime(id: TransactionId): Promise<{ reservedTime: ClusterTimestamp }> {
    const transaction = this.inProgress(id);
    return transaction.serially(async () => {
      if (this.open.get(transactionKey(id)) !== transaction) throw noSuchTransaction(id, 'it was aborted');
      if (transaction.state === 'inProgress') {
        transaction.reservation = await this.writeTimes.reserve();
        transaction.state = 'reserved';
        transaction.reservedAt = Date.now();
      }
      if (transaction.reservation === undefined) throw noSuchTransaction(id, 'it is already prepared');
      return { reservedTime: transaction.reservation.writeTime.time };
    });
  }

  /**
   * The prepare phase: restamps what the transaction wrote with the decided commit time (never
   * below this shard's reservation, so no read here was served at or after it), and makes it
   * durable with PREPARE TRANSACTION. Answers again for a transaction already prepared.
   */
  async prepare(command: PrepareTransaction): Promise<PrepareVote> {
    const key = transactionKey(command);
    const vote: PrepareVote = { prepared: true, ...(this.peers.ownStorage === undefined ? {} : { storage: this.peers.ownStorage }) };
    if (this.recovered.has(key)) return vote;
    const transaction = this.open.get(key);
    if (transaction === undefined) throw noSuchTransaction(command, 'it is not open here: it was aborted or never started');
    return transaction.serially(async () => {
      if (this.open.get(key) !== transaction) throw noSuchTransaction(command, 'it was aborted before it could prepare');
      if (transaction.state === 'prepared') return vote;
      const reserved = transaction.reservation?.writeTime.time;
      if (reserved === undefined || compareClusterTimestamps(command.commitTime, reserved) < 0) {
        await this.abortOpen(transaction, { by: 'participant', reason: 'prepare named a commit time before the reservation' });
        throw new TesseraError('ILLEGAL_OPERATION', `prepare of ${describe(command)} names a commit time before this shard's reservation`);
      }
      this.clock.advance({ clusterTime: command.commitTime });
      try {
        await this.holdWhatItWrote(transaction);
        const manager = transaction.runner!.manager;
        await this.store.restamp(manager, command, transaction.writtenDocuments(), command.commitTime);
        transaction.prepared = {
          ...(await this.store.prepare(manager, { id: transaction.id, commitTime: command.commitTime, coordinator: command.coordinator })),
          ...(command.coordinatorStorage === undefined ? {} : { coordinatorStorage: command.coordinatorStorage }),
        };
      } catch (error) {
        await this.abortOpen(transaction, { by: 'participant', reason: `could not prepare: ${reasonOf(error)}` });
        throw transientInTransaction(error);
      }
      await transaction.runner!.release();
      transaction.runner = null;
      transaction.state = 'prepared';
      transaction.preparedAt = Date.now();
      return vote;
    });
  }

  /**
   * Commits: a prepared transaction at its decided time; an open one on its own (the only
   * participant, or a read-only one), at a time it reserves now. Committing again is answered
   * from the session's record.
   */
  async commit(command: CommitTransaction): Promise<{ committed: true }> {
    const key = transactionKey(command);
    const recovered = this.recovered.get(key);
    if (recovered !== undefined) {
      await this.store.commitPrepared(recovered.prepared.gid);
      this.endRecovered(key);
      return { committed: true };
    }
    const transaction = this.open.get(key);
    if (transaction === undefined) {
      if (await this.store.committed(command)) return { committed: true };
      throw noSuchTransaction(command, 'it is not open here: it was aborted or never started');
    }
    return transaction.serially(async () => {
      if (this.open.get(key) !== transaction) {
        if (await this.store.committed(command)) return { committed: true as const };
        throw noSuchTransaction(command, 'it was aborted');
      }
      if (transaction.state === 'prepared') {
        await this.store.commitPrepared(transaction.prepared!.gid);
      } else if (command.commitTime !== undefined) {
        throw new TesseraError('ILLEGAL_OPERATION', `commit of ${describe(command)} at a decided time, but it was never prepared here`);
      } else {
        await this.commitUnprepared(transaction);
      }
      this.end(transaction);
      return { committed: true as const };
    });
  }

  /**
   * Aborts the transaction here; aborting one that is not here is done already. A prepared one
   * aborts only by its coordinator's decision (`decided`): it voted to commit, and the
   * coordinator may have decided so.
   */
  async abort(command: AbortTransaction): Promise<{ aborted: true }> {
    const key = transactionKey(command);
    const recovered = this.recovered.get(key);
    if (recovered !== undefined) {
      if (command.decided !== true) throw preparedInProgress(command);
      await this.store.rollbackPrepared(recovered.prepared.gid);
      this.endRecovered(key);
      return { aborted: true };
    }
    const transaction = this.open.get(key);
    if (transaction !== undefined)
      await transaction.serially(() => this.abortOpen(transaction, command.decided === true ? 'decided' : { by: command.by ?? 'router' }));
    return { aborted: true };
  }

  /** Opens a transaction's Postgres transaction at its snapshot; a newer txnNumber of the session ends an older one. */
  private async begin(fields: TransactionFields, admit: boolean): Promise<OpenTransaction> {
    const key = transactionKey(fields);
    const existing = this.open.get(key);
    if (existing !== undefined) return existing;
    for (const other of this.open.values()) {
      if (other.id.lsid.id !== fields.lsid.id) continue;
      if (other.id.txnNumber > fields.txnNumber) {
        throw new TesseraError(
          'TRANSACTION_TOO_OLD',
          `txnNumber ${fields.txnNumber} is older than the session's transaction ${other.id.txnNumber}`,
        );
      }
      if (other.state === 'prepared') {
        // Its decision is on its way (the coordinator answers once the decision is durable).
        await Promise.race([other.ended, sleep(PREPARED_WAIT_MS)]);
        if (this.open.get(transactionKey(other.id)) === other) {
          throw new TesseraError(
            'PREPARED_TRANSACTION_IN_PROGRESS',
            `the session's transaction ${other.id.txnNumber} is prepared and not yet resolved`,
            {
              errorLabels: ['TransientTransactionError'],
            },
          );
        }
        continue;
      }
      await other.serially(() =>
        this.abortOpen(other, { by: 'participant', reason: `the session started transaction ${fields.txnNumber}` }),
      );
    }
    if (admit) await this.history.admit({ atClusterTime: fields.atClusterTime });
    const runner = this.pool!.createQueryRunner();
    const snapshot = this.writeTimes.writeTimeAt(fields.atClusterTime);
    try {
      await runner.connect().catch((error: unknown) => {
        throw poolExhausted(error, this.settings.TESSERA_TRANSACTION_POOL_SIZE);
      });
      // The older side of a wait waits this long; wait-die ends any other wait sooner.
      const lockTimeoutMs = Math.max(
        this.settings.TESSERA_TRANSACTION_OLDER_WAIT_MS,
        this.settings.TESSERA_MAX_TRANSACTION_LOCK_REQUEST_TIMEOUT_MS,
      );
      await this.store.begin(runner.manager, snapshot, lockTimeoutMs, key);
    } catch (error) {
      await runner.release();
      throw error;
    }
    const transaction = new OpenTransaction({ lsid: fields.lsid, txnNumber: fields.txnNumber }, snapshot, runner, Date.now());
    const raced = this.open.get(key);
    if (raced !== undefined) {
      await runner.query('ROLLBACK').finally(() => runner.release());
      return raced;
    }
    this.open.set(key, transaction);
    return transaction;
  }

  private inProgress(id: TransactionId): OpenTransaction {
    const transaction = this.open.get(transactionKey(id));
    if (transaction === undefined) throw noSuchTransaction(id, 'it is not open here: it was aborted, committed or never started');
    return transaction;
  }

  /** One participant, or a read-only one: commits at a time reserved now, restamping what it wrote. */
  private async commitUnprepared(transaction: OpenTransaction): Promise<void> {
    const manager = transaction.runner!.manager;
    if (transaction.readOnly) {
      await manager.query('COMMIT');
      return;
    }
    try {
      await this.holdWhatItWrote(transaction);
      transaction.reservation ??= await this.writeTimes.reserve();
      await this.store.restamp(manager, transaction.id, transaction.writtenDocuments(), transaction.reservation.writeTime.time);
      await manager.query('COMMIT');
    } catch (error) {
      await this.abortOpen(transaction, { by: 'participant', reason: `could not commit: ${reasonOf(error)}` });
      throw transientInTransaction(error);
    }
    this.reporter.decided(transaction.id, 'commit', 'participant', { commitTime: transaction.reservation.writeTime.time });
  }

  /**
   * Keeps migrations of what the transaction wrote waiting until it ends (a write lease per
   * collection, which a migration's critical section waits for), and checks that this shard still
   * owns every document it wrote: a chunk that moved away while the transaction ran would take
   * the versions from before it, and the commit here would land on orphans. Throws `STALE_CONFIG`
   * (transient) then.
   */
  private async holdWhatItWrote(transaction: OpenTransaction): Promise<void> {
    const state = await this.runtime.state();
    for (const written of transaction.writtenDocuments()) {
      const lease = await this.runtime.enter(written.ns, 'write', () => state.checkShardVersion(written.ns, IGNORED_VERSION));
      transaction.leases.push(lease);
      if (!written.shardKeys.every((key) => lease.metadata.owns(key))) {
        throw new TesseraError(
          'STALE_CONFIG',
          `a chunk of ${written.ns} this transaction wrote moved to another shard before it committed`,
          {
            details: { namespace: written.ns },
          },
        );
      }
    }
  }

  /**
   * Rolls an open transaction back and forgets it; a prepared one only when its coordinator
   * `decided` so (it refuses otherwise). Any other abort is this shard's decision, reported with
   * its cause. Runs inside its `serially`, so the state it sees is the one a phase queued before
   * it left.
   */
  private async abortOpen(transaction: OpenTransaction, cause: 'decided' | { by: DecidedBy; reason?: string }): Promise<void> {
    if (this.open.get(transactionKey(transaction.id)) !== transaction) return;
    if (transaction.state === 'prepared') {
      if (cause !== 'decided') throw preparedInProgress(transaction.id);
      await this.store.rollbackPrepared(transaction.prepared!.gid);
    } else await this.rollback(transaction);
    this.end(transaction);
    if (cause !== 'decided')
      this.reporter.decided(transaction.id, 'abort', cause.by, cause.reason === undefined ? {} : { reason: cause.reason });
  }

  private async rollback(transaction: OpenTransaction): Promise<void> {
    const runner = transaction.runner;
    if (runner === null) return;
    transaction.runner = null;
    try {
      await runner.query('ROLLBACK');
    } finally {
      await runner.release();
    }
  }

  /** Forgets an ended transaction: its connection back to the pool, its reserved time released. */
  private end(transaction: OpenTransaction): void {
    this.open.delete(transactionKey(transaction.id));
    transaction.end();
    if (transaction.runner !== null) {
      void transaction.runner.release();
      transaction.runner = null;
    }
    transaction.reservation?.release();
    for (const lease of transaction.leases.splice(0)) lease.release();
  }

  private endRecovered(key: string): void {
    this.recovered.get(key)?.release();
    this.recovered.delete(key);
  }

  /**
   * Aborts transactions past transactionLifetimeLimitSeconds that have not begun to commit, and
   * those that reserved a commit time but were not prepared within
   * `TESSERA_TRANSACTION_RESOLVE_AFTER_MS` (their coordinator or its network failed between the
   * phases): not yet prepared, they may abort on their own, and their reservation no longer
   * holds reads back.
   */
  private async reap(): Promise<void> {
    const now = Date.now();
    const lifetime = now - this.settings.TESSERA_TRANSACTION_LIFETIME_LIMIT_SECS * 1000;
    const reservation = now - this.settings.TESSERA_TRANSACTION_RESOLVE_AFTER_MS;
    await this.abortJudged((t) => {
      if (t.state === 'inProgress' && t.startedAt <= lifetime) {
        return { by: 'reaper', reason: 'past its lifetime limit (transactionLifetimeLimitSeconds)' };
      }
      if (t.state === 'reserved' && t.reservedAt! <= reservation)
        return { by: 'reaper', reason: 'a commit time reserved and never prepared' };
      return undefined;
    });
  }

  /**
   * Aborts the transactions in progress here that wrote to any of `namespaces`, because they can
   * no longer commit (movePrimary took those collections to another shard): their row locks
   * would otherwise hold the collections' drop until the reaper came. Not yet prepared, they may
   * abort on their own; a prepared one is left to its coordinator (movePrimary's critical section
   * waited for those to end).
   */
  abortWriting(namespaces: readonly string[], reason: string): Promise<void> {
    return this.abortJudged((t) =>
      t.state !== 'prepared' && t.writtenDocuments().some((w) => namespaces.includes(w.ns)) ? { by: 'participant', reason } : undefined,
    );
  }

  /**
   * Aborts each open transaction `judge` gives a cause for, judged again in its turn: a phase
   * queued before the abort (a prepare) may have moved it on.
   */
  private async abortJudged(judge: (transaction: OpenTransaction) => { by: DecidedBy; reason: string } | undefined): Promise<void> {
    for (const transaction of [...this.open.values()]) {
      if (judge(transaction) === undefined) continue;
      await transaction.serially(async () => {
        const cause = judge(transaction);
        if (cause === undefined) return;
        this.logger.info({ lsid: transaction.id.lsid.id, txnNumber: transaction.id.txnNumber }, `aborting a transaction: ${cause.reason}`);
        await this.abortOpen(transaction, cause);
      });
    }
  }

  /**
   * The prepared transactions waiting for their coordinator's decision: those found at start, and
   * those prepared here at or before `preparedBy` (ms since the epoch).
   */
  awaitingDecision(preparedBy: number): PreparedTransaction[] {
    const waiting = [...this.recovered.values()].map((r) => r.prepared);
    for (const transaction of this.open.values()) {
      if (transaction.state === 'prepared' && transaction.preparedAt! <= preparedBy) waiting.push(transaction.prepared!);
    }
    return waiting;
  }

  /** The transaction as prepared here; or whether it is open and not yet prepared, or not here. */
  preparedHere(id: TransactionId): PreparedTransaction | 'notPrepared' | 'notHere' {
    const key = transactionKey(id);
    const open = this.open.get(key);
    const prepared = this.recovered.get(key)?.prepared ?? (open?.state === 'prepared' ? open.prepared : undefined);
    return prepared ?? (open === undefined ? 'notHere' : 'notPrepared');
  }
}

/** An error's codeName, or its message: why a transaction aborted. */
function reasonOf(error: unknown): string {
  return error instanceof TesseraError ? ERROR_CODES[error.code].codeName : (error as Error).message;
}

function firstWriteError(result: unknown): WriteErrorEntry | undefined {
  const errors = (result as { writeErrors?: WriteErrorEntry[] } | null)?.writeErrors;
  return Array.isArray(errors) ? errors[0] : undefined;
}

function describe(id: TransactionId): string {
  return `transaction ${id.txnNumber} of session ${id.lsid.id}`;
}

/** A failure to get a transaction connection: the pool's timeout is TemporarilyUnavailable; any other stays as it is. */
function poolExhausted(error: unknown, size: number): unknown {
  if (!/timeout exceeded when trying to connect/i.test((error as Error).message)) return error;
  return new TesseraError(
    'TEMPORARILY_UNAVAILABLE',
    `every one of this shard's ${size} transaction connections is held by an open transaction (TESSERA_TRANSACTION_POOL_SIZE); retry the transaction`,
    { cause: error, errorLabels: ['TransientTransactionError'] },
  );
}

/** A prepared transaction's answer to anything but its coordinator's decision. */
function preparedInProgress(id: TransactionId): TesseraError {
  return new TesseraError(
    'PREPARED_TRANSACTION_IN_PROGRESS',
    `${describe(id)} is prepared on this shard: only its coordinator's decision ends it`,
    { errorLabels: ['TransientTransactionError'] },
  );
}

function noSuchTransaction(id: TransactionId, why: string): TesseraError {
  return new TesseraError('NO_SUCH_TRANSACTION', `${describe(id)} is not in progress on this shard: ${why}`, {
    errorLabels: ['TransientTransactionError'],
  });
}
