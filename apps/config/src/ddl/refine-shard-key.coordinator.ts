import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import { isDeepStrictEqual } from 'node:util';
import { ObjectId } from 'bson';
import type { Logger } from 'pino';
import { type ShardKeyPattern, TesseraError, parseShardKeyPattern, refineChunks } from '@tessera/core';
import type { ShardCollectionResult } from '@tessera/protocol';
import { LOGGER } from '@tessera/platform';
import { type CollectionRow, chunkFromRow, generationOfRow } from '../catalog/catalog-rows.js';
import { databaseLock, databaseOf } from '../catalog/namespace.js';
import { ChangelogService } from '../changelog/changelog.service.js';
import { ConfigClockService } from '../clock/config-clock.service.js';
import { MigrationRecordsService } from '../migration/migration-records.service.js';
import { CollectionCatalogStore } from './collection-catalog.store.js';
import type { PhaseContext } from './ddl-coordinator.js';
import { DdlCoordinatorService } from './ddl-coordinator.service.js';
import type { KeyPatternObject } from './shard-collection.coordinator.js';
import { ShardDirectory } from './shard-directory.js';

/** A refineCollectionShardKey request, as validated by `refineShardKeyRequestSchema`. */
export interface RefineShardKeyArgs {
  ns: string;
  key: KeyPatternObject;
}

/** The coordinator document's state (`ddl_coordinators.state`); its shape is persisted. */
export interface RefineState {
  epoch: string;
  shards: string[];
  /** The collection after the refine (or as it was, when it already had the requested key). */
  result?: ShardCollectionResult;
}

type Context = PhaseContext<RefineShardKeyArgs, RefineState>;

/** What every phase reads first: the collection's row, its current key and the requested one. */
interface Keys {
  row: CollectionRow;
  current: ShardKeyPattern;
  refined: ShardKeyPattern;
}

/** The phases, in order; their names are persisted in `ddl_coordinators.phase` and name failpoints. */
const PHASES = ['prepare', 'rekeyOnShards', 'commit'] as const;

/**
 * refineCollectionShardKey as a coordinator (MongoDB's RefineCollectionShardKeyCoordinator),
 * under the database and collection locks: suffix fields added to the key, a new epoch, the same
 * chunk majors and minors, the documents re-keyed on every shard that owns chunks. Migrations are
 * blocked from the prepare phase to the commit; a failed refine lifts the block.
 */
@Injectable()
export class RefineShardKeyCoordinator implements OnModuleInit {
  constructor(
    private readonly coordinators: DdlCoordinatorService,
    private readonly catalog: CollectionCatalogStore,
    private readonly shards: ShardDirectory,
    private readonly clock: ConfigClockService,
    private readonly changelog: ChangelogService,
    private readonly migrationRecords: MigrationRecordsService,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  onModuleInit(): void {
    this.coordinators.define<RefineShardKeyArgs, RefineState, ShardCollectionResult>({
      kind: 'refineCollectionShardKey',
      phases: PHASES,
      resources: (request) => [databaseLock(databaseOf(request.ns)), request.ns],
      initialState: () => ({ epoch: new ObjectId().toHexString(), shards: [] }),
      runPhase: (phase, context) => this.runPhase(phase, context),
      result: (state) => state.result!,
      onFailure: (request) => this.catalog.allowMigrations(request.ns),
    });
  }

  /**
   * Every phase starts from the catalog: a collection that is not sharded fails the refine, and
   * one that already has the requested key (asked for, or resumed after this refine's commit) is
   * the result.
   */
  private async runPhase(phase: string, context: Context): Promise<RefineState> {
    const { request, state } = context;
    if (state.result !== undefined) return state;
    const row = await this.catalog.find(request.ns);
    if (row === undefined) {
      throw new TesseraError('NAMESPACE_NOT_FOUND', `collection "${request.ns}" is not sharded`, { details: { ns: request.ns } });
    }
    if (isDeepStrictEqual(Object.entries(row.key_pattern), Object.entries(request.key))) {
      return { ...state, result: await this.catalog.describe(request.ns) };
    }
    const keys = { row, current: parseShardKeyPattern(row.key_pattern), refined: parseShardKeyPattern(request.key) };
    switch (phase) {
      case 'prepare':
        return this.prepare(context, keys);
      case 'rekeyOnShards':
        return this.rekeyOnShards(context, keys);
      case 'commit':
        return this.commit(context, keys);
      default:
        throw new TesseraError('INTERNAL', `refineCollectionShardKey has no phase ${phase}`);
    }
  }

  /**
   * Expects: the collection sharded under its current key. Checks that the new key extends it,
   * stops migrations (waiting for those in flight: a chunk moved while documents are re-keyed
   * could land on a shard that was never re-keyed). Leaves: `shards`, the chunks' owners.
   */
  private async prepare({ request, state, inFencedTransaction }: Context, { row, current, refined }: Keys): Promise<RefineState> {
    const isPrefix = current.fields.every((f, i) => refined.fields[i]?.path === f.path && refined.fields[i]?.hashed === f.hashed);
    if (!isPrefix || refined.fields.length <= current.fields.length) {
      throw new TesseraError(
        'BAD_VALUE',
        `the new shard key ${JSON.stringify(request.key)} must start with the current key ${JSON.stringify(row.key_pattern)} and add fields`,
        { details: { current: row.key_pattern, requested: request.key } },
      );
    }
    await this.migrationRecords.stopMigrations(row.uuid, inFencedTransaction);
    return { ...state, shards: await this.catalog.chunkOwners(row.uuid) };
  }

  /** Expects: migrations stopped. Re-keys the documents on every owner. Leaves the state as it was. */
  private async rekeyOnShards({ request, state }: Context, { row }: Keys): Promise<RefineState> {
    const targets = await this.shards.targets(state.shards);
    await Promise.all(targets.map(({ client }) => client.refineShardKey(row.uuid, request.key)));
    return state;
  }

  /**
   * Expects: every owner re-keyed. In one fenced transaction at a new ConfigTime: the chunks
   * under the new epoch with their bounds extended, the new key, migrations allowed again, zone
   * ranges extended, a changelog row. Then the owners refresh. Leaves: `result`.
   */
  private async commit({ request, state, inFencedTransaction }: Context, { row, current, refined }: Keys): Promise<RefineState> {
    await inFencedTransaction(async (manager) => {
      const { collection, chunks: chunkRows } = await this.catalog.lockWithChunks(manager, row.uuid);
      const { configTime } = await this.clock.tick(manager);
      const added = refined.fields.length - current.fields.length;
      const chunks = refineChunks(
        chunkRows.map((c) => chunkFromRow(c, generationOfRow(collection))),
        { epoch: state.epoch, timestamp: configTime },
        added,
      );
      const refinedKey = { uuid: row.uuid, epoch: state.epoch, timestamp: configTime, key: request.key };
      await this.catalog.commitRefinedKey(manager, refinedKey, refined, chunks);
      await this.catalog.extendZoneRanges(manager, request.ns, refined, added);
      await this.changelog.record(manager, {
        what: 'refineCollectionShardKey',
        ns: request.ns,
        details: { from: row.key_pattern, to: request.key, epoch: state.epoch },
      });
    });
    await this.refreshShards(request.ns, state.shards);
    return { ...state, result: await this.catalog.describe(request.ns) };
  }

  /**
   * Has the shards holding `ns` refresh its metadata now, so that they answer a router still
   * routing by the old key and epoch with STALE_CONFIG at once. A shard that does not answer
   * refreshes when it next sees the new epoch; the refine has committed either way.
   */
  private async refreshShards(ns: string, shards: string[]): Promise<void> {
    const targets = await this.shards.targets(shards);
    const results = await Promise.allSettled(targets.map(({ client }) => client.refreshMetadata(ns)));
    results.forEach((result, i) => {
      if (result.status === 'rejected') {
        const url = targets[i]!.url;
        this.logger.warn({ err: result.reason, ns }, `${url} did not refresh ${ns} after its refine: ${(result.reason as Error).message}`);
      }
    });
  }
}
