import { Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { DataSource, type EntityManager } from 'typeorm';
import {
  type Chunk,
  type ChunkRange,
  type ShardKey,
  type ShardKeyPattern,
  TesseraError,
  type Value,
  type ValueObject,
  compareShardKeys,
  chunkRangeToString,
  encodeKey,
  fromExtendedJsonObject,
  rangesEqual,
  shardKeyFromObject,
} from '@tessera/core';
import {
  type ClonePacing,
  type MoveChunkRequest,
  type MoveRangeRequest,
  type MoveRangeResult,
  chunkRangeToWire,
  moveChunkRequestSchema,
  moveRangeRequestSchema,
  shardKeyToWire,
} from '@tessera/protocol';
import { InternalClients, parseWith } from '@tessera/platform';
import { findCollection, readCollectionVersion } from '../catalog/catalog-read.service.js';
import { type ChunkRow, type CollectionRow, chunkFromRow, generationOfRow, keyPatternOfRow } from '../catalog/catalog-rows.js';
import { MetadataCommitService } from '../catalog/metadata-commit.service.js';
import { ClusterSettingsService } from '../settings/cluster-settings.service.js';
import { ActiveMigrationStore } from './active-migration.store.js';
import { MigrationRecordsService } from './migration-records.service.js';

/** How long the config server waits for a donor to finish a migration. */
const MIGRATION_TIMEOUT_MS = 3_600_000;

interface Target {
  ns: string;
  uuid: string;
  chunk: Chunk;
  range: ChunkRange;
  maxChunkSizeBytes: number;
  donorUrl: string;
  recipientUrl: string;
}

/** What the balancer adds to a moveRange. */
export interface BalancerMoveOptions {
  /** Why (`imbalance`, `topChunk`, ...): kept with the active migration, so the commit's changelog row says it. */
  reason?: string;
  /** The load throttle's pacing, handed to the donor and recipient. */
  clonePacing?: ClonePacing;
  /** Told the migration's id and recipient once it is registered, before its donor runs it. */
  onRegistered?: (migration: { migrationId: string; recipientUrl: string }) => void;
}

/**
 * The config server's side of migrations: moveRange and moveChunk find the chunk (splitting
 * first when asked to move a sub-range), check the recipient, record the migration in
 * `active_migrations` (one per chunk, so a retry joins it and another is refused), and hand it
 * to the donor, which runs the protocol and commits. The record goes when the donor answers;
 * MigrationRecordsService ends those whose donor never does.
 */
@Injectable()
export class MigrationManagerService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly store: ActiveMigrationStore,
    private readonly records: MigrationRecordsService,
    private readonly commits: MetadataCommitService,
    private readonly settings: ClusterSettingsService,
    private readonly clients: InternalClients,
  ) {}

  /** A moveRange from the balancer (see `BalancerMoveOptions`); a user's has none. */
  async moveRange(input: MoveRangeRequest, options: BalancerMoveOptions = {}): Promise<MoveRangeResult> {
    const request = parseWith(moveRangeRequestSchema, input, 'moveRange request');
    const target = await this.target(request.ns, request.toShard, async (manager, row, pattern) => {
      const min = keyOf(pattern, request.min, 'min');
      const chunk = await chunkHolding(manager, row, min);
      if (request.max === undefined) {
        if (compareShardKeys(chunk.range.min, min) !== 0) {
          throw new TesseraError(
            'BAD_VALUE',
            `moveRange with only min needs a chunk that starts at min; the chunk holding it is ${chunkRangeToString(chunk.range)}`,
            {
              details: { ns: request.ns, problem: 'notChunkStart' },
            },
          );
        }
        return { chunk, range: chunk.range };
      }
      const max = keyOf(pattern, request.max, 'max');
      if (compareShardKeys(min, max) >= 0)
        throw new TesseraError('BAD_VALUE', 'moveRange needs min < max', { details: { ns: request.ns } });
      if (compareShardKeys(max, chunk.range.max) > 0) {
        throw new TesseraError(
          'BAD_VALUE',
          `the range crosses a chunk boundary at ${JSON.stringify(shardKeyToWire(chunk.range.max))}; move the chunks one at a time`,
          {
            details: { ns: request.ns, problem: 'crossesChunks' },
          },
        );
      }
      return { chunk, range: { min, max } };
    });
    return this.migrate(target, request.toShard, request.forceJumbo, request.waitForDelete, options);
  }

  async moveChunk(input: MoveChunkRequest): Promise<MoveRangeResult> {
    const request = parseWith(moveChunkRequestSchema, input, 'moveChunk request');
    const target = await this.target(request.ns, request.to, async (manager, row, pattern) => {
      if (request.find !== undefined) {
        const chunk = await chunkHolding(manager, row, keyOf(pattern, request.find, 'find'));
        return { chunk, range: chunk.range };
      }
      const [lower, upper] = request.bounds!;
      const range = { min: keyOf(pattern, lower, 'bounds[0]'), max: keyOf(pattern, upper, 'bounds[1]') };
      const chunk = await chunkHolding(manager, row, range.min);
      if (!rangesEqual(chunk.range, range)) {
        throw new TesseraError(
          'BAD_VALUE',
          `bounds ${chunkRangeToString(range)} are not a chunk (the chunk there is ${chunkRangeToString(chunk.range)})`,
          {
            details: { ns: request.ns, problem: 'notAChunk' },
          },
        );
      }
      return { chunk, range };
    });
    return this.migrate(target, request.to, request.forceJumbo, request.waitForDelete);
  }

  private async target(
    ns: string,
    toShard: string,
    locate: (manager: EntityManager, row: CollectionRow, pattern: ShardKeyPattern) => Promise<{ chunk: Chunk; range: ChunkRange }>,
  ): Promise<Target> {
    return this.dataSource.transaction('REPEATABLE READ', async (manager) => {
      const row = await findCollection(manager, ns);
      if (!row.allow_migrations) {
        throw migrationsNotAllowed(ns);
      }
      const pattern = keyPatternOfRow(row);
      const { chunk, range } = await locate(manager, row, pattern);
      if (chunk.shard === toShard) {
        throw new TesseraError('BAD_VALUE', `${chunkRangeToString(range)} of ${ns} is already on ${toShard}`, {
          details: { ns, problem: 'sameShard', shard: toShard },
        });
      }
      const shards: Array<{ name: string; url: string; state: string }> = await manager.query(
        'SELECT name, url, state FROM shards WHERE name = ANY($1)',
        [[chunk.shard, toShard]],
      );
      const recipient = shards.find((s) => s.name === toShard);
      const donor = shards.find((s) => s.name === chunk.shard);
      if (recipient === undefined)
        throw new TesseraError('SHARD_NOT_FOUND', `Shard ${toShard} is not registered.`, { details: { shard: toShard } });
      if (recipient.state === 'draining') {
        throw new TesseraError('ILLEGAL_OPERATION', `Shard ${toShard} is draining; nothing can move onto it.`, {
          details: { shard: toShard },
        });
      }
      if (donor === undefined)
        throw new TesseraError('SHARD_NOT_FOUND', `The donor shard ${chunk.shard} is not registered.`, { details: { shard: chunk.shard } });
      return {
        ns,
        uuid: row.uuid,
        chunk,
        range,
        maxChunkSizeBytes:
          row.max_chunk_size_bytes === null ? (await this.settings.get()).chunkSizeBytes : Number(row.max_chunk_size_bytes),
        donorUrl: donor.url,
        recipientUrl: recipient.url,
      };
    });
  }

  private async migrate(
    target: Target,
    toShard: string,
    forceJumbo: boolean,
    waitForDelete: boolean,
    { reason, clonePacing, onRegistered }: BalancerMoveOptions = {},
  ): Promise<MoveRangeResult> {
    const range = await this.splitOff(target);
    const migrationId = await this.register(target, range, toShard, forceJumbo, waitForDelete, reason);
    onRegistered?.({ migrationId, recipientUrl: target.recipientUrl });
    const donor = this.clients.migration(target.donorUrl, MIGRATION_TIMEOUT_MS);
    let result: MoveRangeResult;
    try {
      result = await donor.moveRange({
        migrationId,
        ns: target.ns,
        collectionUuid: target.uuid,
        range: chunkRangeToWire(range),
        recipient: toShard,
        recipientUrl: target.recipientUrl,
        forceJumbo,
        waitForDelete,
        maxChunkSizeBytes: target.maxChunkSizeBytes,
        ...(clonePacing === undefined ? {} : { clonePacing }),
      });
    } catch (error) {
      // An error the donor answered, whatever its code (it relays its recipient's unreachability
      // as its own), says the migration ended there. Without an answer the donor may still run
      // it: the record stays until MigrationRecordsService settles it.
      if (error instanceof TesseraError && error.answeredBy !== undefined) await this.store.remove(migrationId);
      throw error;
    }
    await this.store.forget(migrationId);
    return result;
  }

  /** For a sub-range, splits the chunk at the range's ends first (MongoDB's moveRange does the same). */
  private async splitOff(target: Target): Promise<ChunkRange> {
    const { chunk, range } = target;
    if (rangesEqual(chunk.range, range)) return range;
    const points: ShardKey[] = [];
    if (compareShardKeys(range.min, chunk.range.min) > 0) points.push(range.min);
    if (compareShardKeys(range.max, chunk.range.max) < 0) points.push(range.max);
    const generation = await this.dataSource.transaction(async (manager) => {
      const row = await findCollection(manager, target.ns);
      return readCollectionVersion(manager, row.uuid, generationOfRow(row));
    });
    await this.commits.commitSplit({
      ns: target.ns,
      expectedCollectionVersion: generation,
      shard: chunk.shard,
      range: chunkRangeToWire(chunk.range),
      splitPoints: points.map(shardKeyToWire),
    });
    return range;
  }

  /**
   * Records the migration in active_migrations. The same chunk asked to move to the same shard
   * joins the recorded migration; to another shard, it is refused while the recorded one runs,
   * and the record is settled when neither of its shards runs it.
   */
  private async register(
    target: Target,
    range: ChunkRange,
    toShard: string,
    forceJumbo: boolean,
    waitForDelete: boolean,
    reason: string | undefined,
  ): Promise<string> {
    const min = Buffer.from(encodeKey(range.min));
    for (;;) {
      const migrationId = randomUUID();
      const recorded = await this.store.register({
        id: migrationId,
        ns: target.ns,
        collectionUuid: target.uuid,
        min,
        max: Buffer.from(encodeKey(range.max)),
        minEjson: JSON.stringify(shardKeyToWire(range.min)),
        maxEjson: JSON.stringify(shardKeyToWire(range.max)),
        donor: target.chunk.shard,
        recipient: toShard,
        forceJumbo,
        waitForDelete,
        reason: reason ?? null,
      });
      if (recorded) return migrationId;
      if (!(await this.store.allowsMigrations(target.uuid))) throw migrationsNotAllowed(target.ns);
      const active = await this.store.ofChunk(target.uuid, min);
      if (active === undefined) continue;
      if (active.recipient === toShard) return active.id;
      if (!(await this.records.settleIfNotRunning(active, `${chunkRangeToString(range)} was asked to move to ${toShard} instead`))) {
        throw new TesseraError(
          'CONFLICTING_OPERATION',
          `${chunkRangeToString(range)} of ${target.ns} is already moving to ${active.recipient}`,
          {
            details: { ns: target.ns, migrationId: active.id, recipient: active.recipient },
          },
        );
      }
    }
  }
}

function migrationsNotAllowed(ns: string): TesseraError {
  return new TesseraError('CONFLICTING_OPERATION', `Migrations of ${ns} are not allowed now (a DDL operation is running on it).`, {
    details: { ns, problem: 'migrationsNotAllowed' },
  });
}

function keyOf(pattern: ShardKeyPattern, object: Record<string, unknown>, where: string): ShardKey {
  try {
    return shardKeyFromObject(pattern, fromExtendedJsonObject(object) as ValueObject as Readonly<Record<string, Value>>);
  } catch (error) {
    if (error instanceof TesseraError) throw new TesseraError(error.code, `${where}: ${error.message}`, { details: { field: where } });
    throw error;
  }
}

async function chunkHolding(manager: EntityManager, row: CollectionRow, key: ShardKey): Promise<Chunk> {
  const rows: ChunkRow[] = await manager.query('SELECT * FROM chunks WHERE collection_uuid = $1 AND min <= $2 ORDER BY min DESC LIMIT 1', [
    row.uuid,
    Buffer.from(encodeKey(key)),
  ]);
  const found = rows[0];
  if (found === undefined) throw new TesseraError('INTERNAL', `no chunk of ${row.ns} holds the key`, { details: { ns: row.ns } });
  return chunkFromRow(found, generationOfRow(row));
}
