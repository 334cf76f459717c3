import { Injectable, type OnModuleInit } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { ObjectId } from 'bson';
import type { EntityManager } from 'typeorm';
import {
  type ShardKeyPattern,
  TesseraError,
  createInitialChunks,
  globalMaxKey,
  globalMinKey,
  hashedSplitPoints,
  parseShardKeyPattern,
} from '@tessera/core';
import type { ShardCollectionResult } from '@tessera/protocol';
import type { CollectionRow } from '../catalog/catalog-rows.js';
import { databaseLock, databaseOf } from '../catalog/namespace.js';
import { ChangelogService } from '../changelog/changelog.service.js';
import { ConfigClockService } from '../clock/config-clock.service.js';
import { CollectionCatalogStore } from './collection-catalog.store.js';
import { DatabaseDdlService } from './database-ddl.service.js';
import type { PhaseContext } from './ddl-coordinator.js';
import { DdlCoordinatorService } from './ddl-coordinator.service.js';
import { ShardDirectory } from './shard-directory.js';

export type KeyPatternObject = Record<string, 1 | 'hashed'>;

/** A shardCollection request, as validated by `shardCollectionRequestSchema`. */
export interface ShardCollectionArgs {
  ns: string;
  key: KeyPatternObject;
  unique: boolean;
  numInitialChunks?: number | undefined;
}

/** The coordinator document's state (`ddl_coordinators.state`); its shape is persisted. */
export interface ShardCollectionState {
  uuid: string;
  epoch: string;
  /** Set when the collection was already sharded with the same options: nothing to do. */
  existing?: ShardCollectionResult;
  /** Sharding an existing unsharded collection: its data stays on the primary, under its uuid. */
  adopt?: boolean;
  shards: string[];
  numChunks: number;
  result?: ShardCollectionResult;
}

type Context = PhaseContext<ShardCollectionArgs, ShardCollectionState>;

/** The phases, in order; their names are persisted in `ddl_coordinators.phase` and name failpoints. */
const PHASES = ['prepare', 'createOnShards', 'commit', 'rekeyAfterCommit'] as const;

/**
 * shardCollection as a coordinator (MongoDB's CreateCollectionCoordinator), under the database
 * and collection locks. Ranged keys start with one chunk [MinKey, MaxKey) on the database's
 * primary shard; a key whose first field is hashed is pre-split into `numInitialChunks` (default
 * 2 per shard) chunks spread over every active shard. An existing unsharded collection is
 * adopted: it starts as one chunk on its primary shard, its documents re-keyed in place.
 * Sharding again with the same options answers the existing collection (every phase then does
 * nothing); with other options it is refused.
 */
@Injectable()
export class ShardCollectionCoordinator implements OnModuleInit {
  constructor(
    private readonly coordinators: DdlCoordinatorService,
    private readonly catalog: CollectionCatalogStore,
    private readonly shards: ShardDirectory,
    private readonly databases: DatabaseDdlService,
    private readonly clock: ConfigClockService,
    private readonly changelog: ChangelogService,
  ) {}

  onModuleInit(): void {
    this.coordinators.define<ShardCollectionArgs, ShardCollectionState, ShardCollectionResult>({
      kind: 'shardCollection',
      phases: PHASES,
      resources: (request) => [databaseLock(databaseOf(request.ns)), request.ns],
      initialState: () => ({ uuid: randomUUID(), epoch: new ObjectId().toHexString(), shards: [], numChunks: 1 }),
      runPhase: (phase, context) => this.runPhase(phase, context),
      result: (state) => (state.existing ?? state.result)!,
      onFailure: (request, state) => this.dropUncommitted(request, state),
    });
  }

  private async runPhase(phase: string, context: Context): Promise<ShardCollectionState> {
    if (context.state.existing !== undefined) return context.state;
    const pattern = parseShardKeyPattern(context.request.key);
    switch (phase) {
      case 'prepare':
        return this.prepare(context, pattern);
      case 'createOnShards':
        return this.createOnShards(context);
      case 'commit':
        return this.commit(context, pattern);
      case 'rekeyAfterCommit':
        return this.rekeyAfterCommit(context);
      default:
        throw new TesseraError('INTERNAL', `shardCollection has no phase ${phase}`);
    }
  }

  /**
   * Expects: nothing decided. Checks the options, answers an already sharded collection, creates
   * the database if missing, and decides where the chunks go. Leaves: `shards` and `numChunks`
   * (and `adopt` for an existing unsharded collection with documents), or `existing`.
   */
  private async prepare({ request, state, inFencedTransaction }: Context, pattern: ShardKeyPattern): Promise<ShardCollectionState> {
    checkOptions(request, pattern);
    const existing = await this.catalog.find(request.ns);
    if (existing !== undefined) return { ...state, existing: await this.alreadySharded(request, existing) };
    const database = await inFencedTransaction((manager) => this.databases.createDatabaseLocked(manager, databaseOf(request.ns)));
    const primary = database.primaryShard;
    const unsharded = await this.shards.storedCollection(primary, request.ns);
    if (unsharded !== undefined && unsharded.documents > 0) return adopt(request, state, unsharded, primary);
    if (unsharded !== undefined) await (await this.shards.shard(primary)).dropNamespace(request.ns);
    if (!pattern.fields[0]!.hashed) return { ...state, shards: [primary], numChunks: 1 };
    const shards = await this.shards.activeShardNames();
    return { ...state, shards, numChunks: request.numInitialChunks ?? 2 * shards.length };
  }

  /**
   * Expects: `shards` decided. Creates the collection's table and shard key index on every shard
   * that receives chunks, or, when adopting, re-keys the existing documents for the shard key.
   * Leaves the state as it was.
   */
  private async createOnShards({ request, state }: Context): Promise<ShardCollectionState> {
    if (state.adopt) {
      // Repeated after the commit (rekeyAfterCommit) for writes that arrived in between.
      await (await this.shards.shard(state.shards[0]!)).refineShardKey(state.uuid, request.key);
      return state;
    }
    const targets = await this.shards.targets(state.shards);
    await Promise.all(
      targets.map(({ client }) => client.createCollection(state.uuid, { ns: request.ns, keyPattern: request.key, unique: request.unique })),
    );
    return state;
  }

  /**
   * Expects: the tables exist where the chunks go. Enters the collection and its initial chunks
   * in the catalog at a new ConfigTime, with a `shardCollection.end` changelog row, in one fenced
   * transaction; a repeat after the commit only describes it. Leaves: `result`.
   */
  private commit({ request, state, inFencedTransaction }: Context, pattern: ShardKeyPattern): Promise<ShardCollectionState> {
    return inFencedTransaction(async (manager) => {
      if ((await this.catalog.uuidOf(manager, request.ns)) === state.uuid)
        return { ...state, result: await this.catalog.describe(request.ns) };
      const chunkCount = await this.insertCollection(manager, request, state, pattern);
      await this.changelog.record(manager, {
        what: 'shardCollection.end',
        ns: request.ns,
        shard: state.shards[0],
        details: { key: request.key, unique: request.unique, numChunks: chunkCount, shards: state.shards, uuid: state.uuid },
      });
      const result = {
        ns: request.ns,
        uuid: state.uuid,
        epoch: state.epoch,
        key: request.key,
        unique: request.unique,
        chunks: chunkCount,
        shards: [...new Set(state.shards)].sort(),
      };
      return { ...state, result };
    });
  }

  /**
   * Expects: committed. When adopting, re-keys the documents again: writes that reached the
   * unsharded collection between the first re-key and the commit were keyed by _id; since the
   * commit the shard refuses unsharded writes to it. Leaves the state as it was.
   */
  private async rekeyAfterCommit({ request, state }: Context): Promise<ShardCollectionState> {
    if (state.adopt) await (await this.shards.shard(state.shards[0]!)).refineShardKey(state.uuid, request.key);
    return state;
  }

  /**
   * After a failure, drops the tables createOnShards made for a collection the catalog never
   * took: a shard stores one collection per namespace, so a table left behind under this uuid
   * would refuse every later shardCollection of the namespace. An adopted collection keeps its
   * documents, and a committed one stays. Dropping by uuid is idempotent, and a shard that never
   * created the table has nothing to drop.
   */
  private async dropUncommitted(request: ShardCollectionArgs, state: ShardCollectionState): Promise<void> {
    if (state.adopt) return;
    if ((await this.catalog.find(request.ns))?.uuid === state.uuid) return;
    const shards = await this.shards.all();
    await Promise.all(shards.map(({ client }) => client.dropCollection(state.uuid)));
  }

  /** The collection and its initial chunks in the catalog, at a new ConfigTime; answers how many chunks. */
  private async insertCollection(
    manager: EntityManager,
    request: ShardCollectionArgs,
    state: ShardCollectionState,
    pattern: ShardKeyPattern,
  ): Promise<number> {
    const { configTime } = await this.clock.tick(manager);
    const chunks = createInitialChunks({
      generation: { epoch: state.epoch, timestamp: configTime },
      keySpace: { min: globalMinKey(pattern), max: globalMaxKey(pattern) },
      splitPoints: hashedSplitPoints(pattern, state.numChunks),
      shards: state.shards,
      at: configTime,
    });
    const collection = { ns: request.ns, db: databaseOf(request.ns), uuid: state.uuid, epoch: state.epoch, timestamp: configTime };
    await this.catalog.insertCollection(manager, { ...collection, key: request.key, unique: request.unique }, pattern, chunks);
    return chunks.length;
  }

  /** The existing collection when `request` asks for what it already is; `ILLEGAL_OPERATION` otherwise. */
  private async alreadySharded(request: ShardCollectionArgs, row: CollectionRow): Promise<ShardCollectionResult> {
    if (isDeepStrictEqual(Object.entries(row.key_pattern), Object.entries(request.key)) && row.is_unique === request.unique) {
      return this.catalog.describe(request.ns);
    }
    throw new TesseraError(
      'ILLEGAL_OPERATION',
      `collection "${request.ns}" is already sharded with key ${JSON.stringify(row.key_pattern)}${row.is_unique ? ' (unique)' : ''}`,
      { details: { ns: request.ns, key: row.key_pattern, unique: row.is_unique } },
    );
  }
}

/** Options that cannot go together: a unique hashed key, `numInitialChunks` for a ranged prefix. */
function checkOptions(request: ShardCollectionArgs, pattern: ShardKeyPattern): void {
  if (request.unique && pattern.fields.some((f) => f.hashed)) {
    throw new TesseraError('BAD_VALUE', 'a hashed shard key cannot be unique', { details: { key: request.key } });
  }
  if (request.numInitialChunks !== undefined && !pattern.fields[0]!.hashed) {
    throw new TesseraError('BAD_VALUE', 'numInitialChunks applies only to a shard key whose first field is hashed', {
      details: { key: request.key },
    });
  }
}

/**
 * An existing collection with documents starts, as MongoDB's, as one chunk on its primary shard,
 * which the splitter and balancer then divide and spread; it keeps its uuid.
 */
function adopt(
  request: ShardCollectionArgs,
  state: ShardCollectionState,
  unsharded: { uuid: string; documents: number },
  primary: string,
): ShardCollectionState {
  if (request.unique) {
    throw new TesseraError(
      'ILLEGAL_OPERATION',
      `sharding the existing collection ${request.ns} with a unique key is not supported; shard it before writing to it`,
      { details: { ns: request.ns } },
    );
  }
  if (request.numInitialChunks !== undefined) {
    throw new TesseraError(
      'BAD_VALUE',
      `numInitialChunks applies only to an empty collection; ${request.ns} holds ${unsharded.documents} documents`,
      { details: { ns: request.ns, documents: unsharded.documents } },
    );
  }
  return { ...state, uuid: unsharded.uuid, adopt: true, shards: [primary], numChunks: 1 };
}
