import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import type { Logger } from 'pino';
import { TesseraError } from '@tessera/core';
import { LOGGER } from '@tessera/platform';
import type { DatabaseDescription, ShardClient } from '@tessera/protocol';
import { databaseLock } from '../catalog/namespace.js';
import { ChangelogService } from '../changelog/changelog.service.js';
import { ConfigClockService } from '../clock/config-clock.service.js';
import { DatabaseCatalogStore } from './database-catalog.store.js';
import { describeDatabase } from './database-ddl.service.js';
import type { PhaseContext } from './ddl-coordinator.js';
import { DdlCoordinatorService } from './ddl-coordinator.service.js';
import { DdlCoordinatorStore } from './ddl-coordinator.store.js';
import { ShardDirectory } from './shard-directory.js';

/** A movePrimary request, as validated by `movePrimaryRequestSchema`. */
export interface MovePrimaryArgs {
  db: string;
  to: string;
}

/** The coordinator document's state (`ddl_coordinators.state`); its shape is persisted. */
export interface MovePrimaryState {
  /** The primary before the move; equal to `to` when there is nothing to move. */
  from: string | null;
  /** The old primary's critical section is held under this reason: the coordinator's id. */
  reason?: string;
  /** The unsharded collections cloned to the new primary, and their documents. */
  collections?: string[];
  documents?: number;
  database?: DatabaseDescription;
}

type Context = PhaseContext<MovePrimaryArgs, MovePrimaryState>;

/** The phases, in order; their names are persisted in `ddl_coordinators.phase` and name failpoints. */
const PHASES = ['prepare', 'clone', 'enterCriticalSection', 'commit', 'exitCriticalSection', 'clean'] as const;

/** Pause between the recipient's progress answers while it clones. */
const CLONE_POLL_MS = 100;
/** Attempts of the cleanup after a failed move (each shard call is idempotent). */
const CLEANUP_ATTEMPTS = 5;

/**
 * movePrimary as a coordinator (MongoDB's MovePrimaryCoordinator), under the database lock: the
 * old primary (donor) blocks writes to the database's unsharded collections in a persisted
 * critical section, the new primary (recipient) clones them (data, indexes and the sessions'
 * retry history), the donor blocks
 * reads too, the catalog names the new primary at the next database version, the donor lets
 * its waiting operations go (they find their database version stale and their router retries at
 * the new primary) and then drops its copies. Sharded collections stay where their chunks are.
 *
 * Unlike MongoDB, which drops the donor's copies before it leaves the critical section, the
 * section ends first: a transaction on the old primary that wrote to a moved collection holds
 * row locks the drop must wait for, and it can only end (abort on its stale version) once the
 * section lets its next statement through.
 *
 * Every phase repeats safely after a kill of the config leader, the donor or the recipient: the
 * section is taken again under the same reason, the clone starts each collection over, and the
 * commit finds itself done.
 */
@Injectable()
export class MovePrimaryCoordinator implements OnModuleInit {
  constructor(
    private readonly coordinators: DdlCoordinatorService,
    private readonly coordinatorRows: DdlCoordinatorStore,
    private readonly catalog: DatabaseCatalogStore,
    private readonly shards: ShardDirectory,
    private readonly clock: ConfigClockService,
    private readonly changelog: ChangelogService,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  onModuleInit(): void {
    this.coordinators.define<MovePrimaryArgs, MovePrimaryState, DatabaseDescription>({
      kind: 'movePrimary',
      phases: PHASES,
      resources: (request) => [databaseLock(request.db)],
      initialState: () => ({ from: null }),
      runPhase: (phase, context) => this.runPhase(phase, context),
      // The commit phase records the database as it is afterwards.
      result: (state) => state.database!,
      onFailure: (request, state) => this.undo(request, state),
    });
  }

  private runPhase(phase: string, context: Context): Promise<MovePrimaryState> {
    if (phase !== 'prepare' && context.state.from === context.request.to) return Promise.resolve(context.state);
    switch (phase) {
      case 'prepare':
        return this.prepare(context);
      case 'clone':
        return this.clone(context);
      case 'enterCriticalSection':
        return this.enterCriticalSection(context);
      case 'commit':
        return this.commit(context);
      case 'exitCriticalSection':
        return this.exitCriticalSection(context);
      case 'clean':
        return this.clean(context);
      default:
        return Promise.reject(new TesseraError('INTERNAL', `movePrimary has no phase ${phase}`));
    }
  }

  /**
   * Expects: nothing. Checks that the database exists and the target shard is active. Leaves:
   * `from`, the reason its critical section will be held under, and the database as it was.
   */
  private async prepare({ id, request }: Context): Promise<MovePrimaryState> {
    const row = await this.catalog.find(request.db);
    if (row === undefined) {
      throw new TesseraError('NAMESPACE_NOT_FOUND', `database "${request.db}" does not exist`, { details: { db: request.db } });
    }
    const database = describeDatabase(row);
    await this.shards.assertActive(request.to);
    return { from: database.primaryShard, reason: id, database };
  }

  /**
   * Expects: `from` is the primary. The donor blocks writes to the database's unsharded
   * collections (waiting for those under way); the collections are listed only then, so one
   * created meanwhile is not missed. The recipient drops unsharded collections of the database
   * it holds (left by an earlier primary role: only the primary's are live) and clones the
   * donor's. Leaves: `collections` and `documents`, as cloned.
   */
  private async clone({ request, state }: Context): Promise<MovePrimaryState> {
    const donor = await this.shards.shard(state.from!);
    const recipient = await this.shards.shard(request.to);
    await this.holdSection(donor, request.db, state.reason!, false);
    const collections = await this.unshardedOn(donor, request.db);
    for (const ns of await this.unshardedOn(recipient, request.db)) {
      if (!collections.includes(ns)) await recipient.dropNamespace(ns);
    }
    for (;;) {
      const status = await recipient.cloneCatalogData(request.db, { operationId: state.reason!, from: donor.url, collections });
      const documents = status.collections.reduce((sum, c) => sum + c.documents, 0);
      if (status.state === 'done') return { ...state, collections, documents };
      this.logger.info(
        { db: request.db, to: request.to, documents, collections: status.collections.filter((c) => c.done).length, of: collections.length },
        `movePrimary of ${request.db}: cloning`,
      );
      await new Promise((resolve) => setTimeout(resolve, CLONE_POLL_MS));
    }
  }

  /** Expects: the clone is complete. The donor blocks reads of the collections too, so none is served from it once the catalog moves. */
  private async enterCriticalSection({ request, state }: Context): Promise<MovePrimaryState> {
    const donor = await this.shards.shard(state.from!);
    await this.holdSection(donor, request.db, state.reason!, true);
    return state;
  }

  /** The collections of `db` that `shard` stores and the catalog does not know as sharded. */
  private async unshardedOn(shard: ShardClient, db: string): Promise<string[]> {
    const sharded = new Set(await this.catalog.shardedCollections(db));
    return (await shard.namespacesOf(db)).filter((ns) => !sharded.has(ns));
  }

  /**
   * Has the donor hold the database's section for `reason`. A section another reason holds can
   * only be a failed movePrimary's whose cleanup did not reach the donor (this coordinator holds
   * the database's lock, so no other runs): it is released once the catalog confirms that
   * coordinator ended, so running movePrimary again heals what a failure left.
   */
  private async holdSection(donor: ShardClient, db: string, reason: string, blockReads: boolean): Promise<void> {
    try {
      await donor.enterDatabaseCriticalSection(db, { reason, blockReads });
    } catch (error) {
      const heldBy = error instanceof TesseraError && error.code === 'CONFLICTING_OPERATION' ? error.details?.heldBy : undefined;
      if (typeof heldBy !== 'string' || !(await this.coordinatorRows.ended(heldBy))) throw error;
      this.logger.warn({ db, heldBy }, `movePrimary of ${db}: releasing the critical section a failed movePrimary left on the donor`);
      await donor.exitDatabaseCriticalSection(db, { reason: heldBy });
      await donor.enterDatabaseCriticalSection(db, { reason, blockReads });
    }
  }

  /**
   * Expects: the donor blocks reads and writes. Moves the primary and bumps the database version
   * at a new ConfigTime with a changelog row, in one fenced transaction; a repeat after a
   * failover finds the move committed. Leaves: `database`, as it is afterwards.
   */
  private commit({ request, state, inFencedTransaction }: Context): Promise<MovePrimaryState> {
    return inFencedTransaction(async (manager) => {
      const row = await this.catalog.lock(manager, request.db);
      if (row === undefined) throw new TesseraError('NAMESPACE_NOT_FOUND', `database "${request.db}" does not exist`);
      if (row.primary_shard === request.to) return { ...state, database: describeDatabase(row) };
      const updated = await this.catalog.setPrimary(manager, request.db, request.to);
      await this.clock.tick(manager);
      await this.changelog.record(manager, {
        what: 'movePrimary',
        ns: request.db,
        shard: request.to,
        details: { from: row.primary_shard, to: request.to, collections: state.collections ?? [], documents: state.documents ?? 0 },
      });
      return { ...state, database: describeDatabase(updated) };
    });
  }

  /** Expects: the move committed. The donor forgets the database's routing and lets waiting operations go: they are told they are stale. */
  private async exitCriticalSection({ request, state }: Context): Promise<MovePrimaryState> {
    const donor = await this.shards.shard(state.from!);
    await donor.exitDatabaseCriticalSection(request.db, { reason: state.reason! });
    return state;
  }

  /** Expects: the move committed and the section is released. The donor drops its copies of the moved collections. */
  private async clean({ request, state }: Context): Promise<MovePrimaryState> {
    const donor = await this.shards.shard(state.from!);
    await donor.dropStaleData(request.db, { collections: state.collections ?? [] });
    return state;
  }

  /**
   * After a failure (MongoDB's cleanup on abort): before the commit, the recipient's partial
   * copies go and the donor's section is released, so the database is as it was; after it, only
   * the section is released (the copies on the recipient are the data now). Each call is
   * idempotent and retried, since a section left behind would keep the collections blocked.
   */
  private async undo(request: MovePrimaryArgs, state: MovePrimaryState): Promise<void> {
    if (state.from === null || state.from === request.to || state.reason === undefined) return;
    for (let attempt = 1; ; attempt++) {
      try {
        const row = await this.catalog.find(request.db);
        const committed = row?.primary_shard === request.to;
        const donor = await this.shards.shard(state.from);
        if (!committed && row !== undefined) {
          const recipient = await this.shards.shard(request.to);
          for (const ns of await this.unshardedOn(donor, request.db)) await recipient.dropNamespace(ns);
        }
        await donor.exitDatabaseCriticalSection(request.db, { reason: state.reason });
        return;
      } catch (error) {
        if (attempt >= CLEANUP_ATTEMPTS) throw error;
        await new Promise((resolve) => setTimeout(resolve, 200 * 2 ** attempt));
      }
    }
  }
}
