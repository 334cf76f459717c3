import { Injectable, type OnModuleInit } from '@nestjs/common';
import { TesseraError } from '@tessera/core';
import type { RenameCollectionRequest } from '@tessera/protocol';
import { databaseLock, databaseOf } from '../catalog/namespace.js';
import { ChangelogService } from '../changelog/changelog.service.js';
import { CollectionCatalogStore } from './collection-catalog.store.js';
import { DatabaseCatalogStore } from './database-catalog.store.js';
import type { PhaseContext } from './ddl-coordinator.js';
import { DdlCoordinatorService } from './ddl-coordinator.service.js';
import { ShardDirectory } from './shard-directory.js';

/** The request as validated by `renameCollectionRequestSchema`. */
export type RenameCollectionArgs = Required<RenameCollectionRequest>;

/** The coordinator document's state (`ddl_coordinators.state`); its shape is persisted. */
export interface RenameState {
  /** The database's primary shard, which stores the unsharded source. */
  primary?: string;
  /** The source collection's uuid there. */
  uuid?: string;
}

type Context = PhaseContext<RenameCollectionArgs, RenameState>;

/** The phases, in order; their names are persisted in `ddl_coordinators.phase` and name failpoints. */
const PHASES = ['prepare', 'renameOnPrimary'] as const;

/**
 * renameCollection as a coordinator (MongoDB's RenameCollectionCoordinator), under the locks of
 * the database and both names, for an unsharded collection within its database: the collection
 * keeps its uuid, table and indexes and takes the new name on the database's primary shard,
 * where an existing target is dropped first in the same transaction when `dropTarget` is given.
 * Unsharded collections are not in the config catalog, so the rename is the primary's; the
 * database lock keeps movePrimary and the other DDL of the database out meanwhile.
 */
@Injectable()
export class RenameCollectionCoordinator implements OnModuleInit {
  constructor(
    private readonly coordinators: DdlCoordinatorService,
    private readonly catalog: CollectionCatalogStore,
    private readonly databases: DatabaseCatalogStore,
    private readonly shards: ShardDirectory,
    private readonly changelog: ChangelogService,
  ) {}

  onModuleInit(): void {
    this.coordinators.define<RenameCollectionArgs, RenameState, { ok: 1 }>({
      kind: 'renameCollection',
      phases: PHASES,
      resources: (request) => [databaseLock(databaseOf(request.from)), ...[request.from, request.to].sort()],
      initialState: () => ({}),
      runPhase: (phase, context) => (phase === 'prepare' ? this.prepare(context) : this.renameOnPrimary(context)),
      result: () => ({ ok: 1 }),
    });
  }

  /**
   * Expects: nothing. Refuses a rename to itself or across databases, a sharded source or target
   * (`ILLEGAL_OPERATION`), a missing source (`NAMESPACE_NOT_FOUND`) and an existing target
   * without `dropTarget` (`NAMESPACE_EXISTS`). Leaves: `primary` and the source's `uuid`.
   */
  private async prepare({ request, state }: Context): Promise<RenameState> {
    const { from, to, dropTarget } = request;
    const refuse = (why: string) =>
      new TesseraError('ILLEGAL_OPERATION', `cannot rename ${from} to ${to}: ${why}`, { details: { from, to } });
    if (from === to) throw refuse('a collection cannot be renamed to itself');
    if (databaseOf(from) !== databaseOf(to)) throw refuse('a rename across databases is not supported');
    if ((await this.catalog.find(from)) !== undefined) throw refuse(`${from} is sharded, and only unsharded collections are renamed`);
    if ((await this.catalog.find(to)) !== undefined) throw refuse(`${to} is sharded`);
    const missing = () => new TesseraError('NAMESPACE_NOT_FOUND', `Source collection ${from} does not exist`, { details: { ns: from } });
    const database = await this.databases.find(databaseOf(from));
    if (database === undefined) throw missing();
    const primary = database.primary_shard;
    const source = await this.shards.storedCollection(primary, from);
    if (source === undefined) throw missing();
    if (!dropTarget && (await this.shards.storedCollection(primary, to)) !== undefined) {
      throw new TesseraError('NAMESPACE_EXISTS', `target namespace ${to} exists`, { details: { ns: to } });
    }
    return { ...state, primary, uuid: source.uuid };
  }

  /**
   * Expects: `primary` and `uuid`. Renames the collection on the primary (idempotent: a repeated
   * phase finds it renamed) and records the rename in the changelog once.
   */
  private async renameOnPrimary({ id, request, state, inFencedTransaction }: Context): Promise<RenameState> {
    const primary = await this.shards.shard(state.primary!);
    const { renamed } = await primary.renameCollection(state.uuid!, request.to, request.dropTarget);
    if (!renamed)
      throw new TesseraError('NAMESPACE_NOT_FOUND', `Source collection ${request.from} does not exist`, { details: { ns: request.from } });
    await inFencedTransaction(async (manager) => {
      const recorded: unknown[] = await manager.query(
        `SELECT 1 FROM changelog WHERE what = 'renameCollection' AND details->>'operation' = $1`,
        [id],
      );
      if (recorded.length > 0) return;
      await this.changelog.record(manager, {
        what: 'renameCollection',
        ns: request.from,
        shard: state.primary!,
        details: { operation: id, to: request.to, dropTarget: request.dropTarget },
      });
    });
    return state;
  }
}
