import { Injectable, type OnModuleInit } from '@nestjs/common';
import { TesseraError } from '@tessera/core';
import type { DatabaseDescription } from '@tessera/protocol';
import { databaseLock } from '../catalog/namespace.js';
import { ChangelogService } from '../changelog/changelog.service.js';
import { ConfigClockService } from '../clock/config-clock.service.js';
import { DatabaseCatalogStore } from './database-catalog.store.js';
import { describeDatabase } from './database-ddl.service.js';
import type { PhaseContext } from './ddl-coordinator.js';
import { DdlCoordinatorService } from './ddl-coordinator.service.js';
import { ShardDirectory } from './shard-directory.js';

/** A movePrimary request, as validated by `movePrimaryRequestSchema`. */
export interface MovePrimaryArgs {
  db: string;
  to: string;
}

/** The coordinator document's state (`ddl_coordinators.state`); its shape is persisted. */
export interface MovePrimaryState {
  from: string | null;
  database?: DatabaseDescription;
}

type Context = PhaseContext<MovePrimaryArgs, MovePrimaryState>;

/** The phases, in order; their names are persisted in `ddl_coordinators.phase` and name failpoints. */
const PHASES = ['prepare', 'commit'] as const;

/**
 * movePrimary as a coordinator (MongoDB's MovePrimaryCoordinator), under the database lock. It
 * moves the primary in the catalog only: cloning unsharded collections is not built yet, so a
 * move is refused while the current primary holds any.
 */
@Injectable()
export class MovePrimaryCoordinator implements OnModuleInit {
  constructor(
    private readonly coordinators: DdlCoordinatorService,
    private readonly catalog: DatabaseCatalogStore,
    private readonly shards: ShardDirectory,
    private readonly clock: ConfigClockService,
    private readonly changelog: ChangelogService,
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
    });
  }

  private runPhase(phase: string, context: Context): Promise<MovePrimaryState> {
    switch (phase) {
      case 'prepare':
        return this.prepare(context);
      case 'commit':
        return this.commit(context);
      default:
        return Promise.reject(new TesseraError('INTERNAL', `movePrimary has no phase ${phase}`));
    }
  }

  /**
   * Expects: nothing. Checks that the database exists, the target shard is active and the
   * current primary holds no unsharded collection. Leaves: `from` and the database as it was.
   */
  private async prepare({ request }: Context): Promise<MovePrimaryState> {
    const row = await this.catalog.find(request.db);
    if (row === undefined) {
      throw new TesseraError('NAMESPACE_NOT_FOUND', `database "${request.db}" does not exist`, { details: { db: request.db } });
    }
    const database = describeDatabase(row);
    await this.shards.assertActive(request.to);
    if (database.primaryShard !== request.to) await this.assertNoUnshardedData(request.db, database.primaryShard);
    return { from: database.primaryShard, database };
  }

  /**
   * Expects: the checks passed. Moves the primary and bumps the database version at a new
   * ConfigTime with a changelog row, in one fenced transaction; a repeat after a failover finds
   * the move committed. Leaves: `database`, as it is afterwards.
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
        details: { from: row.primary_shard, to: request.to },
      });
      return { ...state, database: describeDatabase(updated) };
    });
  }

  /**
   * Cloning unsharded collections to a new primary is not built yet; moving the primary of a
   * database that has some would leave them where routers no longer look, so it is refused.
   */
  private async assertNoUnshardedData(db: string, primary: string): Promise<void> {
    const [target] = await this.shards.targets([primary]);
    if (target === undefined) return;
    const stored = await target.client.namespacesOf(db);
    const sharded = await this.catalog.shardedCollections(db);
    const unsharded = stored.filter((ns) => !sharded.includes(ns));
    if (unsharded.length > 0) {
      throw new TesseraError(
        'ILLEGAL_OPERATION',
        `movePrimary of "${db}" is refused: its primary shard "${primary}" holds unsharded collections (${unsharded.join(', ')}), and moving them is not supported yet; shard or drop them first`,
        { details: { db, primaryShard: primary, unsharded } },
      );
    }
  }
}
