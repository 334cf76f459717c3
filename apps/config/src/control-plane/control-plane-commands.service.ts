import { Inject, Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { DataSource } from 'typeorm';
import {
  type Chunk,
  type ChunkVersion,
  type ShardKey,
  type ShardKeyPattern,
  TesseraError,
  type Value,
  type ValueObject,
  fromExtendedJsonObject,
  parseShardKeyPattern,
  shardKeyFromObject,
} from '@tessera/core';
import { InternalClients, LOGGER } from '@tessera/platform';
import {
  type ConfigClient,
  type DatabaseDescription,
  type DropResult,
  type MoveChunkRequest,
  type MoveRangeRequest,
  type MoveRangeResult,
  type RemoveShardResult,
  type ShardCollectionRequest,
  type ShardDescription,
  type UpdateZoneKeyRangeRequest,
  chunkFromWire,
  chunkRangeToWire,
  shardKeyToWire,
} from '@tessera/protocol';
import { CatalogReadService } from '../catalog/catalog-read.service.js';
import { MetadataCommitService } from '../catalog/metadata-commit.service.js';
import { CollectionDdlService } from '../ddl/collection-ddl.service.js';
import { DatabaseDdlService } from '../ddl/database-ddl.service.js';
import { ShardRegistryService } from '../shards/shard-registry.service.js';
import { ZonesService } from '../zones/zones.service.js';
import { ControlPlaneReadsService } from './control-plane-reads.service.js';
import { MigrationManagerService } from '../migration/migration-manager.service.js';
import { ChangelogService } from '../changelog/changelog.service.js';

/** How often a chunk command re-reads the collection version after losing a race with another commit. */
const COMMIT_ATTEMPTS = 3;
/** DDL on the leader may wait for locks and for every shard; the forwarded call waits as long. */
const FORWARD_TIMEOUT_MS = 120_000;

/**
 * The administrative commands behind GraphQL mutations. Each calls the same service as the
 * internal API. Commands that only the config leader runs (DDL, zones, removeShard) are sent to
 * the leader over the signed internal API when this process is not it, so any config process
 * accepts every mutation.
 */
@Injectable()
export class ControlPlaneCommandsService {
  constructor(
    private readonly clients: InternalClients,
    private readonly shards: ShardRegistryService,
    private readonly databases: DatabaseDdlService,
    private readonly collections: CollectionDdlService,
    private readonly zones: ZonesService,
    private readonly reads: CatalogReadService,
    private readonly commits: MetadataCommitService,
    private readonly catalog: ControlPlaneReadsService,
    private readonly migrations: MigrationManagerService,
    private readonly changelog: ChangelogService,
    private readonly dataSource: DataSource,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  /**
   * Runs a migration (moveRange or moveChunk). With `wait` it answers when the migration has
   * committed or failed. Without, it answers at once with an operation id: `moveRange.start` and,
   * when the migration ends, `moveRange.end` (with the migration id and the outcome) are written
   * to the changelog, so they arrive on `migrationProgress` with the donor's phase and progress
   * reports in between.
   */
  async migrate(
    ns: string,
    request: Record<string, unknown>,
    run: () => Promise<MoveRangeResult>,
    wait: boolean,
  ): Promise<{ operationId: string; state: 'running' | 'committed' | 'failed'; result: MoveRangeResult | null; error: unknown }> {
    const operationId = randomUUID();
    if (wait) return { operationId, state: 'committed', result: await run(), error: null };
    await this.recordOperation('moveRange.start', ns, { operationId, ...request });
    void run().then(
      (result) => this.recordOperation('moveRange.end', ns, { operationId, outcome: 'committed', ...result }),
      (error: unknown) =>
        this.recordOperation('moveRange.end', ns, {
          operationId,
          outcome: 'failed',
          error:
            error instanceof TesseraError ? { code: error.code, message: error.message } : { code: 'INTERNAL', message: String(error) },
        }),
    );
    return { operationId, state: 'running', result: null, error: null };
  }

  moveRange(request: MoveRangeRequest): Promise<MoveRangeResult> {
    return this.migrations.moveRange(request);
  }

  moveChunk(request: MoveChunkRequest): Promise<MoveRangeResult> {
    return this.migrations.moveChunk(request);
  }

  private async recordOperation(what: string, ns: string, details: Record<string, unknown>): Promise<void> {
    try {
      await this.dataSource.transaction((manager) => this.changelog.record(manager, { what, ns, details }));
    } catch (error) {
      this.logger.warn({ err: error, what, details }, `could not record ${what} in the changelog`);
    }
  }

  addShard(name: string, url: string): Promise<ShardDescription> {
    return this.shards.addShard({ name, url });
  }

  removeShard(name: string): Promise<RemoveShardResult> {
    return this.onLeader(
      () => this.shards.removeShard({ name }),
      (leader) => leader.removeShard({ name }),
    );
  }

  enableSharding(db: string, primaryShard?: string): Promise<DatabaseDescription> {
    const request = { db, ...(primaryShard === undefined ? {} : { primaryShard }) };
    return this.onLeader(
      () => this.databases.enableSharding(request),
      (leader) => leader.enableSharding(request),
    );
  }

  async shardCollection(request: ShardCollectionRequest): Promise<void> {
    await this.onLeader(
      () => this.collections.shardCollection(request),
      (leader) => leader.shardCollection(request),
    );
  }

  async refineCollectionShardKey(ns: string, key: Record<string, 1 | 'hashed'>): Promise<void> {
    await this.onLeader(
      () => this.collections.refineCollectionShardKey({ ns, key }),
      (leader) => leader.refineCollectionShardKey({ ns, key }),
    );
  }

  dropCollection(ns: string): Promise<DropResult> {
    return this.onLeader(
      () => this.collections.dropCollection({ ns }),
      (leader) => leader.dropCollection({ ns }),
    );
  }

  dropDatabase(db: string): Promise<DropResult> {
    return this.onLeader(
      () => this.databases.dropDatabase({ db }),
      (leader) => leader.dropDatabase({ db }),
    );
  }

  movePrimary(db: string, to: string): Promise<DatabaseDescription> {
    return this.onLeader(
      () => this.databases.movePrimary({ db, to }),
      (leader) => leader.movePrimary({ db, to }),
    );
  }

  addShardToZone(shard: string, zone: string): Promise<{ zones: string[] }> {
    return this.onLeader(
      () => this.zones.addShardToZone({ shard, zone }),
      (leader) => leader.addShardToZone({ shard, zone }),
    );
  }

  removeShardFromZone(shard: string, zone: string): Promise<{ zones: string[] }> {
    return this.onLeader(
      () => this.zones.removeShardFromZone({ shard, zone }),
      (leader) => leader.removeShardFromZone({ shard, zone }),
    );
  }

  async updateZoneKeyRange(request: UpdateZoneKeyRangeRequest): Promise<void> {
    await this.onLeader(
      () => this.zones.updateZoneKeyRange(request),
      (leader) => leader.updateZoneKeyRange(request),
    );
  }

  /**
   * Splits the chunk holding `at` at `at` (which becomes the upper piece's min) and returns the
   * pieces. A metadata commit like a shard's auto-split; the shards refresh on their next request.
   * Throws `BAD_VALUE` when `at` is already a chunk bound.
   */
  splitChunk(ns: string, at: unknown): Promise<Chunk[]> {
    return this.withFreshVersion(ns, async (cv, pattern) => {
      const key = shardKeyFromObject(pattern, keyObject(at, 'at'));
      const chunk = await this.chunkHolding(ns, key);
      const result = await this.commits.commitSplit({
        ns,
        expectedCollectionVersion: cv,
        shard: chunk.shard,
        range: chunkRangeToWire(chunk.range),
        splitPoints: [shardKeyToWire(key)],
      });
      return result.chunks.map(chunkFromWire);
    });
  }

  /** Merges the chunks of one shard that exactly cover `[min, max)` and returns the merged chunk. */
  mergeChunks(ns: string, min: unknown, max: unknown): Promise<Chunk> {
    return this.withFreshVersion(ns, async (cv, pattern) => {
      const minKey = shardKeyFromObject(pattern, keyObject(min, 'min'));
      const maxKey = shardKeyFromObject(pattern, keyObject(max, 'max'));
      const first = await this.chunkHolding(ns, minKey);
      const result = await this.commits.commitMerge({
        ns,
        expectedCollectionVersion: cv,
        shard: first.shard,
        range: { min: shardKeyToWire(minKey), max: shardKeyToWire(maxKey) },
      });
      return chunkFromWire(result.chunks[0]!);
    });
  }

  /** Clears the jumbo flag of the chunk holding `key`; returns it (unchanged when it was not jumbo). */
  clearJumboFlag(ns: string, key: unknown): Promise<Chunk> {
    return this.withFreshVersion(ns, async (cv, pattern) => {
      const chunk = await this.chunkHolding(ns, shardKeyFromObject(pattern, keyObject(key, 'key')));
      const result = await this.commits.clearJumbo({ ns, expectedCollectionVersion: cv, range: chunkRangeToWire(chunk.range) });
      return result.chunks[0] === undefined ? { ...chunk, jumbo: false } : chunkFromWire(result.chunks[0]);
    });
  }

  private chunkHolding(ns: string, key: ShardKey): Promise<Chunk> {
    return this.catalog.chunkHolding(ns, key);
  }

  /** Runs a commit against the current collection version, again (bounded) when another commit won the race. */
  private async withFreshVersion<T>(ns: string, commit: (cv: ChunkVersion, pattern: ShardKeyPattern) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const collection = await this.reads.getCollection(ns);
      try {
        return await commit(collection.collectionVersion, parseShardKeyPattern(collection.keyPattern));
      } catch (error) {
        if (!(error instanceof TesseraError && error.code === 'CONFLICTING_OPERATION' && attempt < COMMIT_ATTEMPTS)) throw error;
      }
    }
  }

  private async onLeader<T>(local: () => Promise<T>, remote: (leader: ConfigClient) => Promise<T>): Promise<T> {
    try {
      return await local();
    } catch (error) {
      const leader = error instanceof TesseraError && error.code === 'NOT_LEADER' ? error.details?.leader : undefined;
      if (typeof leader !== 'string') throw error;
      return remote(this.clients.config(leader, FORWARD_TIMEOUT_MS));
    }
  }
}

function keyObject(value: unknown, name: string): Readonly<Record<string, Value>> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new TesseraError('BAD_VALUE', `${name} must be an object naming every shard key field, e.g. {"customer": 42}`, {
      details: { field: name },
    });
  }
  return fromExtendedJsonObject(value) as ValueObject as Readonly<Record<string, Value>>;
}
