import { Injectable, type OnModuleInit } from '@nestjs/common';
import { TesseraError } from '@tessera/core';
import type { DropResult } from '@tessera/protocol';
import { databaseLock } from '../catalog/namespace.js';
import { ChangelogService } from '../changelog/changelog.service.js';
import { ConfigClockService } from '../clock/config-clock.service.js';
import { CollectionDropper } from './collection-dropper.js';
import { DatabaseCatalogStore } from './database-catalog.store.js';
import type { PhaseContext } from './ddl-coordinator.js';
import { DdlCoordinatorService } from './ddl-coordinator.service.js';
import { ShardDirectory } from './shard-directory.js';

/** The coordinator document's state (`ddl_coordinators.state`); its shape is persisted. */
export interface DropDatabaseState {
  found: boolean;
  collections: string[];
}

type Context = PhaseContext<{ db: string }, DropDatabaseState>;

/** The phases, in order; their names are persisted in `ddl_coordinators.phase` and name failpoints. */
const PHASES = ['prepare', 'dropCollections', 'dropOnShards', 'removeMetadata'] as const;

/**
 * dropDatabase as a coordinator (MongoDB's DropDatabaseCoordinator), under the database lock:
 * its sharded collections dropped one by one as dropCollection drops them, then whatever the
 * shards still store of the database, then the database's catalog entry and zone ranges.
 */
@Injectable()
export class DropDatabaseCoordinator implements OnModuleInit {
  constructor(
    private readonly coordinators: DdlCoordinatorService,
    private readonly catalog: DatabaseCatalogStore,
    private readonly shards: ShardDirectory,
    private readonly dropper: CollectionDropper,
    private readonly clock: ConfigClockService,
    private readonly changelog: ChangelogService,
  ) {}

  onModuleInit(): void {
    this.coordinators.define<{ db: string }, DropDatabaseState, DropResult>({
      kind: 'dropDatabase',
      phases: PHASES,
      resources: (request) => [databaseLock(request.db)],
      initialState: () => ({ found: false, collections: [] }),
      runPhase: (phase, context) => this.runPhase(phase, context),
      result: (state) => ({ dropped: state.found }),
    });
  }

  private runPhase(phase: string, context: Context): Promise<DropDatabaseState> {
    switch (phase) {
      case 'prepare':
        return this.prepare(context);
      case 'dropCollections':
        return this.dropCollections(context);
      case 'dropOnShards':
        return this.dropOnShards(context);
      case 'removeMetadata':
        return this.removeMetadata(context);
      default:
        return Promise.reject(new TesseraError('INTERNAL', `dropDatabase has no phase ${phase}`));
    }
  }

  /** Expects: nothing. Leaves: whether the database exists, and its sharded collections. */
  private async prepare({ request }: Context): Promise<DropDatabaseState> {
    const database = await this.catalog.find(request.db);
    return { found: database !== undefined, collections: await this.catalog.shardedCollections(request.db) };
  }

  /** Expects: `collections`. Drops each (idempotent, so a repeat skips those already gone). Leaves the state as it was. */
  private async dropCollections({ state, inFencedTransaction }: Context): Promise<DropDatabaseState> {
    for (const ns of state.collections) await this.dropper.dropCollectionLocked(ns, inFencedTransaction);
    return state;
  }

  /** Expects: the sharded collections gone. Every shard drops what it still stores of the database. Leaves the state as it was. */
  private async dropOnShards({ request, state }: Context): Promise<DropDatabaseState> {
    const targets = await this.shards.all();
    await Promise.all(targets.map(({ client }) => client.dropDatabase(request.db)));
    return state;
  }

  /**
   * Expects: nothing of the database left on the shards. Removes its catalog entry and zone
   * ranges at a new ConfigTime with a changelog row, in one fenced transaction (nothing when a
   * repeat finds it gone). Leaves the state as it was.
   */
  private async removeMetadata({ request, state, inFencedTransaction }: Context): Promise<DropDatabaseState> {
    await inFencedTransaction(async (manager) => {
      if (!(await this.catalog.remove(manager, request.db))) return;
      await this.clock.tick(manager);
      await this.changelog.record(manager, { what: 'dropDatabase', ns: request.db, details: { collections: state.collections } });
    });
    return state;
  }
}
