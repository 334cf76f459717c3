import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type { Logger } from 'pino';
import { DataSource } from 'typeorm';
import type { MigratedSession } from '@tessera/protocol';
import { LOGGER, type Periodic, runPeriodically } from '@tessera/platform';
import { SessionCatalog } from './session-catalog.js';
import { type HistoryRange, type StoredSession, TransactionsStore } from './transactions.store.js';

/** How often the record log is folded into `txn_records` when nothing else asks for it. */
const FOLD_INTERVAL_MS = 1_000;

/**
 * The shard's stored retry history as a whole: writes record into `txn_record_log` (see
 * `TransactionsStore.recording`), and this service folds that log into `txn_records` before
 * anything reads or changes those rows: a session's load, a migration's history pull, migrated
 * history applied, the reaper. Folds run one at a time, in their own transaction.
 *
 * The invariant that lets writes record without reading or locking `txn_records`: while a
 * session is checked out, nothing but its operation changes its stored history. So what changes
 * history of sessions that may be in use (migrated history applied, the reaper) checks them out
 * first, folds, changes, and has the catalog forget them before checking them in.
 */
@Injectable()
export class SessionRecords implements OnApplicationBootstrap, OnApplicationShutdown {
  private folding: Promise<unknown> = Promise.resolve();
  private loop: Periodic | undefined;

  constructor(
    private readonly dataSource: DataSource,
    private readonly store: TransactionsStore,
    private readonly catalog: SessionCatalog,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  onApplicationBootstrap(): void {
    this.loop = runPeriodically(
      async () => void (await this.fold()),
      FOLD_INTERVAL_MS,
      (error) => this.logger.warn({ err: error }, `folding the retryable-write record log failed: ${(error as Error).message}; will retry`),
    );
  }

  onApplicationShutdown(): void {
    this.loop?.stop();
  }

  /** Folds the record log into `txn_records` (after any fold under way); answers how many sessions it updated. */
  fold(): Promise<number> {
    const next = this.folding.catch(() => undefined).then(() => this.dataSource.transaction((manager) => this.store.foldLog(manager)));
    this.folding = next;
    return next;
  }

  /** The session's stored history, everything it recorded included. */
  async load(lsid: string): Promise<StoredSession | undefined> {
    await this.fold();
    return this.store.loadSession(this.dataSource.manager, lsid);
  }

  /** A page of the retry history of `range`'s documents, everything recorded until now included. */
  async historyInRange(range: HistoryRange, afterLsid: string | undefined, limit: number): Promise<MigratedSession[]> {
    await this.fold();
    return this.store.sessionHistoryInRange(this.dataSource.manager, range, afterLsid, limit);
  }

  /** Applies a page of migrated history in one transaction (see `applyMigratedSessions`); answers how many sessions took it. */
  async applyMigrated(collectionUuid: string, sessions: readonly MigratedSession[]): Promise<number> {
    const applied = await this.changing(
      sessions.map((s) => s.lsid),
      () => this.dataSource.transaction((manager) => this.store.applyMigratedSessions(manager, collectionUuid, sessions)),
    );
    return applied.length;
  }

  /**
   * Sessions whose last folded retryable write is older than `cutoff`, oldest first: candidates,
   * since `reap` folds before it judges them again.
   */
  staleSessions(cutoff: Date, limit: number): Promise<string[]> {
    return this.store.staleSessions(this.dataSource.manager, cutoff, limit);
  }

  /** Forgets the sessions' history unless written after `cutoff` (see `reapSessions`); answers those reaped. */
  reap(lsids: readonly string[], cutoff: Date): Promise<string[]> {
    return this.changing(lsids, () => this.store.reapSessions(this.dataSource.manager, lsids, cutoff));
  }

  /** Runs `change` of the sessions' stored history with them checked out and folded, then has the catalog forget those it names. */
  private async changing(lsids: readonly string[], change: () => Promise<string[]>): Promise<string[]> {
    const checkedOut = await this.catalog.checkOutAll(lsids);
    try {
      await this.fold();
      const changed = await change();
      this.catalog.forget(changed);
      return changed;
    } finally {
      for (const session of checkedOut.values()) session.checkIn();
    }
  }
}
