import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { isDeepStrictEqual } from 'node:util';
import { Long, MaxKey, MinKey, ObjectId } from 'bson';
import { DataSource, type EntityManager } from 'typeorm';
import {
  type ShardKey,
  type ShardKeyPattern,
  TesseraError,
  type Value,
  createInitialChunks,
  decodeKey,
  encodeKey,
  globalMaxKey,
  globalMinKey,
  parseShardKeyPattern,
  refineChunks,
  typeBracketOf,
} from '@tessera/core';
import {
  type DropResult,
  type RefineShardKeyRequest,
  type ShardCollectionRequest,
  type ShardCollectionResult,
  dropCollectionRequestSchema,
  refineShardKeyRequestSchema,
  shardCollectionRequestSchema,
} from '@tessera/protocol';
import { InternalClients, LOGGER, parseWith } from '@tessera/platform';
import { type ChunkRow, type CollectionRow, chunkFromRow, generationOfRow, insertChunkRows, readableKey } from '../catalog/catalog-rows.js';
import { databaseLock, databaseOf } from '../catalog/namespace.js';
import { ChangelogService } from '../changelog/changelog.service.js';
import { ConfigClockService } from '../clock/config-clock.service.js';
import { CollectionDropper } from './collection-dropper.js';
import { DatabaseDdlService } from './database-ddl.service.js';
import { MigrationRecordsService } from '../migration/migration-records.service.js';
import type { FencedTransaction } from './ddl-coordinator.js';
import { DdlCoordinatorService } from './ddl-coordinator.service.js';

type KeyPatternObject = Record<string, 1 | 'hashed'>;
type ShardCollectionArgs = { ns: string; key: KeyPatternObject; unique: boolean; numInitialChunks?: number | undefined };

interface ShardCollectionState {
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

interface RefineState {
  epoch: string;
  shards: string[];
  /** The collection after the refine (or as it was, when it already had the requested key). */
  result?: ShardCollectionResult;
}

/**
 * Collection DDL run by coordinators: shardCollection, dropCollection and
 * refineCollectionShardKey, each serialised by the database and collection locks.
 */
@Injectable()
export class CollectionDdlService implements OnModuleInit {
  constructor(
    private readonly dataSource: DataSource,
    private readonly coordinators: DdlCoordinatorService,
    private readonly databases: DatabaseDdlService,
    private readonly dropper: CollectionDropper,
    private readonly clock: ConfigClockService,
    private readonly changelog: ChangelogService,
    private readonly clients: InternalClients,
    private readonly migrationRecords: MigrationRecordsService,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  onModuleInit(): void {
    this.coordinators.define<ShardCollectionArgs, ShardCollectionState, ShardCollectionResult>({
      kind: 'shardCollection',
      phases: ['prepare', 'createOnShards', 'commit', 'rekeyAfterCommit'],
      resources: (request) => [databaseLock(databaseOf(request.ns)), request.ns],
      initialState: () => ({ uuid: randomUUID(), epoch: new ObjectId().toHexString(), shards: [], numChunks: 1 }),
      runPhase: (phase, context) => this.runShardCollectionPhase(phase, context.request, context.state, context.inFencedTransaction),
      result: (state) => (state.existing ?? state.result)!,
    });
    this.coordinators.define<{ ns: string }, { found: boolean }, DropResult>({
      kind: 'dropCollection',
      phases: ['drop'],
      resources: (request) => [databaseLock(databaseOf(request.ns)), request.ns],
      initialState: () => ({ found: false }),
      runPhase: async (_phase, context) => ({
        found: (await this.dropper.dropCollectionLocked(context.request.ns, context.inFencedTransaction)) || context.state.found,
      }),
      result: (state) => ({ dropped: state.found }),
    });
    this.coordinators.define<{ ns: string; key: KeyPatternObject }, RefineState, ShardCollectionResult>({
      kind: 'refineCollectionShardKey',
      phases: ['prepare', 'rekeyOnShards', 'commit'],
      resources: (request) => [databaseLock(databaseOf(request.ns)), request.ns],
      initialState: () => ({ epoch: new ObjectId().toHexString(), shards: [] }),
      runPhase: (phase, context) => this.runRefinePhase(phase, context.request, context.state, context.inFencedTransaction),
      result: (state) => state.result!,
      // Migrations are blocked from the prepare phase to the commit; a failed refine lifts the block.
      onFailure: async (request) => {
        await this.dataSource.query('UPDATE collections SET allow_migrations = true, updated_at = now() WHERE ns = $1', [request.ns]);
      },
    });
  }

  /**
   * Shards a collection: ranged keys start with one chunk [MinKey, MaxKey) on the database's
   * primary shard; a key whose first field is hashed is pre-split into `numInitialChunks`
   * (default 2 per shard) chunks spread over every active shard. The collection's table and
   * shard key index are created on the shards that receive chunks. Sharding again with the same
   * options answers the existing collection; with other options it is refused.
   */
  shardCollection(input: ShardCollectionRequest): Promise<ShardCollectionResult> {
    return this.coordinators.run('shardCollection', parseWith(shardCollectionRequestSchema, input, 'shardCollection request'));
  }

  dropCollection(input: unknown): Promise<DropResult> {
    return this.coordinators.run('dropCollection', parseWith(dropCollectionRequestSchema, input, 'dropCollection request'));
  }

  /** Refines a shard key by suffix fields: a new epoch, the same chunk majors and minors, documents re-keyed. */
  refineCollectionShardKey(input: RefineShardKeyRequest): Promise<ShardCollectionResult> {
    return this.coordinators.run(
      'refineCollectionShardKey',
      parseWith(refineShardKeyRequestSchema, input, 'refineCollectionShardKey request'),
    );
  }

  /** The sharded collection as the catalog has it; `NAMESPACE_NOT_FOUND` if it is not sharded. */
  async describe(ns: string): Promise<ShardCollectionResult> {
    const rows: CollectionRow[] = await this.dataSource.query('SELECT * FROM collections WHERE ns = $1', [ns]);
    const row = rows[0];
    if (row === undefined) throw new TesseraError('NAMESPACE_NOT_FOUND', `collection "${ns}" is not sharded`, { details: { ns } });
    const shards: Array<{ shard: string; n: string }> = await this.dataSource.query(
      'SELECT shard, count(*) AS n FROM chunks WHERE collection_uuid = $1 GROUP BY shard ORDER BY shard',
      [row.uuid],
    );
    return {
      ns,
      uuid: row.uuid,
      epoch: row.epoch,
      key: row.key_pattern,
      unique: row.is_unique,
      chunks: shards.reduce((sum, s) => sum + Number(s.n), 0),
      shards: shards.map((s) => s.shard),
    };
  }

  private async runShardCollectionPhase(
    phase: string,
    request: ShardCollectionArgs,
    state: ShardCollectionState,
    inFencedTransaction: FencedTransaction,
  ): Promise<ShardCollectionState> {
    if (state.existing !== undefined) return state;
    const pattern = parseShardKeyPattern(request.key);
    switch (phase) {
      case 'prepare': {
        const hashedPrefix = pattern.fields[0]!.hashed;
        if (request.unique && pattern.fields.some((f) => f.hashed)) {
          throw new TesseraError('BAD_VALUE', 'a hashed shard key cannot be unique', { details: { key: request.key } });
        }
        if (request.numInitialChunks !== undefined && !hashedPrefix) {
          throw new TesseraError('BAD_VALUE', 'numInitialChunks applies only to a shard key whose first field is hashed', {
            details: { key: request.key },
          });
        }
        const existing: CollectionRow[] = await this.dataSource.query('SELECT * FROM collections WHERE ns = $1', [request.ns]);
        if (existing[0] !== undefined) {
          const row = existing[0];
          if (isDeepStrictEqual(Object.entries(row.key_pattern), Object.entries(request.key)) && row.is_unique === request.unique) {
            return { ...state, existing: await this.describe(request.ns) };
          }
          throw new TesseraError(
            'ILLEGAL_OPERATION',
            `collection "${request.ns}" is already sharded with key ${JSON.stringify(row.key_pattern)}${row.is_unique ? ' (unique)' : ''}`,
            {
              details: { ns: request.ns, key: row.key_pattern, unique: row.is_unique },
            },
          );
        }
        const database = await inFencedTransaction((manager) => this.databases.createDatabaseLocked(manager, databaseOf(request.ns)));
        const unsharded = await this.existingUnsharded(database.primaryShard, request.ns);
        if (unsharded !== undefined && unsharded.documents > 0) {
          if (request.unique) {
            throw new TesseraError(
              'ILLEGAL_OPERATION',
              `sharding the existing collection ${request.ns} with a unique key is not supported; shard it before writing to it`,
              {
                details: { ns: request.ns },
              },
            );
          }
          if (request.numInitialChunks !== undefined) {
            throw new TesseraError(
              'BAD_VALUE',
              `numInitialChunks applies only to an empty collection; ${request.ns} holds ${unsharded.documents} documents`,
              {
                details: { ns: request.ns, documents: unsharded.documents },
              },
            );
          }
          // As MongoDB: an existing collection starts as one chunk on its primary shard, which the
          // splitter and balancer then divide and spread.
          return { ...state, uuid: unsharded.uuid, adopt: true, shards: [database.primaryShard], numChunks: 1 };
        }
        if (unsharded !== undefined) await this.clients.shard(await this.shardUrl(database.primaryShard)).dropNamespace(request.ns);
        if (!hashedPrefix) return { ...state, shards: [database.primaryShard], numChunks: 1 };
        const active: Array<{ name: string }> = await this.dataSource.query("SELECT name FROM shards WHERE state = 'active' ORDER BY name");
        const shards = active.map((s) => s.name);
        const numChunks = request.numInitialChunks ?? 2 * shards.length;
        return { ...state, shards, numChunks };
      }
      case 'createOnShards': {
        if (state.adopt) {
          // Re-key the existing documents for the shard key; repeated after the commit for writes
          // that arrived in between.
          await this.clients.shard(await this.shardUrl(state.shards[0]!)).refineShardKey(state.uuid, request.key);
          return state;
        }
        const urls = await this.shardUrls(state.shards);
        await Promise.all(
          urls.map((url) =>
            this.clients.shard(url).createCollection(state.uuid, { ns: request.ns, keyPattern: request.key, unique: request.unique }),
          ),
        );
        return state;
      }
      case 'commit':
        return inFencedTransaction(async (manager) => {
          const done: Array<{ uuid: string }> = await manager.query('SELECT uuid FROM collections WHERE ns = $1', [request.ns]);
          if (done[0]?.uuid === state.uuid) return { ...state, result: await this.describe(request.ns) };
          const { configTime } = await this.clock.tick(manager);
          await manager.query(
            `INSERT INTO collections (ns, db, uuid, epoch, timestamp_t, timestamp_i, key_pattern, is_unique) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
            [
              request.ns,
              databaseOf(request.ns),
              state.uuid,
              state.epoch,
              configTime.t,
              configTime.i,
              JSON.stringify(request.key),
              request.unique,
            ],
          );
          const chunks = createInitialChunks({
            generation: { epoch: state.epoch, timestamp: configTime },
            keySpace: { min: globalMinKey(pattern), max: globalMaxKey(pattern) },
            splitPoints: hashedSplitPoints(pattern, state.numChunks),
            shards: state.shards,
            at: configTime,
          });
          await insertChunkRows(manager, state.uuid, pattern, chunks);
          await this.changelog.record(manager, {
            what: 'shardCollection.end',
            ns: request.ns,
            shard: state.shards[0],
            details: { key: request.key, unique: request.unique, numChunks: chunks.length, shards: state.shards, uuid: state.uuid },
          });
          return {
            ...state,
            result: {
              ns: request.ns,
              uuid: state.uuid,
              epoch: state.epoch,
              key: request.key,
              unique: request.unique,
              chunks: chunks.length,
              shards: [...new Set(state.shards)].sort(),
            },
          };
        });
      case 'rekeyAfterCommit':
        // Writes that reached the unsharded collection between the first re-key and the commit
        // were keyed by _id; since the commit the shard refuses unsharded writes to it.
        if (state.adopt) await this.clients.shard(await this.shardUrl(state.shards[0]!)).refineShardKey(state.uuid, request.key);
        return state;
      default:
        throw new TesseraError('INTERNAL', `shardCollection has no phase ${phase}`);
    }
  }

  private async runRefinePhase(
    phase: string,
    request: { ns: string; key: KeyPatternObject },
    state: RefineState,
    inFencedTransaction: FencedTransaction,
  ): Promise<RefineState> {
    if (state.result !== undefined) return state;
    const rows: CollectionRow[] = await this.dataSource.query('SELECT * FROM collections WHERE ns = $1', [request.ns]);
    const row = rows[0];
    if (row === undefined)
      throw new TesseraError('NAMESPACE_NOT_FOUND', `collection "${request.ns}" is not sharded`, { details: { ns: request.ns } });
    // Already refined: either asked for the current key, or resumed after this refine's commit.
    if (isDeepStrictEqual(Object.entries(row.key_pattern), Object.entries(request.key)))
      return { ...state, result: await this.describe(request.ns) };
    const current = parseShardKeyPattern(row.key_pattern);
    const refined = parseShardKeyPattern(request.key);
    switch (phase) {
      case 'prepare': {
        const isPrefix = current.fields.every((f, i) => refined.fields[i]?.path === f.path && refined.fields[i]?.hashed === f.hashed);
        if (!isPrefix || refined.fields.length <= current.fields.length) {
          throw new TesseraError(
            'BAD_VALUE',
            `the new shard key ${JSON.stringify(request.key)} must start with the current key ${JSON.stringify(row.key_pattern)} and add fields`,
            {
              details: { current: row.key_pattern, requested: request.key },
            },
          );
        }
        // No chunk may move while documents are re-keyed: a moved chunk could land on a shard
        // that was never re-keyed. Migrations in flight are waited for.
        await this.migrationRecords.stopMigrations(row.uuid, inFencedTransaction);
        const owners: Array<{ shard: string }> = await this.dataSource.query(
          'SELECT DISTINCT shard FROM chunks WHERE collection_uuid = $1 ORDER BY shard',
          [row.uuid],
        );
        return { ...state, shards: owners.map((o) => o.shard) };
      }
      case 'rekeyOnShards': {
        const urls = await this.shardUrls(state.shards);
        await Promise.all(urls.map((url) => this.clients.shard(url).refineShardKey(row.uuid, request.key)));
        return state;
      }
      case 'commit':
        await inFencedTransaction(async (manager) => {
          const locked: CollectionRow[] = await manager.query('SELECT * FROM collections WHERE uuid = $1 FOR UPDATE', [row.uuid]);
          const collection = locked[0]!;
          const chunkRows: ChunkRow[] = await manager.query('SELECT * FROM chunks WHERE collection_uuid = $1 ORDER BY min', [row.uuid]);
          const { configTime } = await this.clock.tick(manager);
          const added = refined.fields.length - current.fields.length;
          const chunks = refineChunks(
            chunkRows.map((c) => chunkFromRow(c, generationOfRow(collection))),
            { epoch: state.epoch, timestamp: configTime },
            added,
          );
          await manager.query('DELETE FROM chunks WHERE collection_uuid = $1', [row.uuid]);
          await insertChunkRows(manager, row.uuid, refined, chunks);
          await manager.query(
            'UPDATE collections SET epoch = $2, timestamp_t = $3, timestamp_i = $4, key_pattern = $5, allow_migrations = true, updated_at = now() WHERE uuid = $1',
            [row.uuid, state.epoch, configTime.t, configTime.i, JSON.stringify(request.key)],
          );
          await extendZoneRanges(manager, request.ns, refined, added);
          await this.changelog.record(manager, {
            what: 'refineCollectionShardKey',
            ns: request.ns,
            details: { from: row.key_pattern, to: request.key, epoch: state.epoch },
          });
        });
        await this.refreshShards(request.ns, state.shards);
        return { ...state, result: await this.describe(request.ns) };
      default:
        throw new TesseraError('INTERNAL', `refineCollectionShardKey has no phase ${phase}`);
    }
  }

  /**
   * Has the shards holding `ns` refresh its metadata now, so that they answer a router still
   * routing by the old key and epoch with STALE_CONFIG at once. A shard that does not answer
   * refreshes when it next sees the new epoch; the refine has committed either way.
   */
  private async refreshShards(ns: string, shards: string[]): Promise<void> {
    const urls = await this.shardUrls(shards);
    const results = await Promise.allSettled(urls.map((url) => this.clients.shard(url).refreshMetadata(ns)));
    results.forEach((result, i) => {
      if (result.status === 'rejected') {
        this.logger.warn(
          { err: result.reason, ns },
          `${urls[i]} did not refresh ${ns} after its refine: ${(result.reason as Error).message}`,
        );
      }
    });
  }

  /** The collection the primary shard stores under `ns` before it is sharded, if any. */
  private async existingUnsharded(primary: string, ns: string): Promise<{ uuid: string; documents: number } | undefined> {
    try {
      return await this.clients.shard(await this.shardUrl(primary)).describeNamespace(ns);
    } catch (error) {
      if (error instanceof TesseraError && error.code === 'NAMESPACE_NOT_FOUND') return undefined;
      throw error;
    }
  }

  private async shardUrl(name: string): Promise<string> {
    const [url] = await this.shardUrls([name]);
    if (url === undefined) throw new TesseraError('SHARD_NOT_FOUND', `no shard named "${name}"`, { details: { shard: name } });
    return url;
  }

  private async shardUrls(names: string[]): Promise<string[]> {
    const rows: Array<{ url: string }> = await this.dataSource.query('SELECT url FROM shards WHERE name = ANY($1)', [[...new Set(names)]]);
    return rows.map((r) => r.url);
  }
}

/**
 * Evenly spaced points over the 64-bit hash space for `n` chunks, as MongoDB pre-splits hashed
 * keys; the fields after the hashed prefix are MinKey. No points for a ranged key or n = 1.
 */
export function hashedSplitPoints(pattern: ShardKeyPattern, n: number): ShardKey[] {
  if (!pattern.fields[0]!.hashed || n <= 1) return [];
  const span = 2n ** 64n;
  const points: ShardKey[] = [];
  for (let k = 1; k < n; k++) {
    const hash = -(2n ** 63n) + (span * BigInt(k)) / BigInt(n);
    points.push([Long.fromBigInt(hash), ...pattern.fields.slice(1).map((): Value => new MinKey())]);
  }
  return points;
}

/** Zone ranges follow a refined key as chunk bounds do: MinKey suffixes, MaxKey after a MaxKey. */
async function extendZoneRanges(manager: EntityManager, ns: string, pattern: ShardKeyPattern, added: number): Promise<void> {
  const tags: Array<{ min: Buffer; max: Buffer }> = await manager.query('SELECT min, max FROM tags WHERE ns = $1', [ns]);
  const extend = (bound: ShardKey): ShardKey => {
    const isMax = typeBracketOf(bound[bound.length - 1]!) === 'maxKey';
    return [...bound, ...Array.from({ length: added }, (): Value => (isMax ? new MaxKey() : new MinKey()))];
  };
  for (const tag of tags) {
    const min = extend(decodeKey(tag.min));
    const max = extend(decodeKey(tag.max));
    await manager.query('UPDATE tags SET min = $3, max = $4, min_ejson = $5, max_ejson = $6 WHERE ns = $1 AND min = $2', [
      ns,
      tag.min,
      Buffer.from(encodeKey(min)),
      Buffer.from(encodeKey(max)),
      readableKey(pattern, min),
      readableKey(pattern, max),
    ]);
  }
}
