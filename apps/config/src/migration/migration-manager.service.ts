import { Inject, Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
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
  type MigrationDecision,
  type MoveChunkRequest,
  type MoveRangeRequest,
  type MoveRangeResult,
  chunkRangeToWire,
  decideMigrationRequestSchema,
  moveChunkRequestSchema,
  moveRangeRequestSchema,
  shardKeyToWire,
} from '@tessera/protocol';
import { InternalClients, LOGGER, parseWith } from '@tessera/platform';
import { findCollection, readCollectionVersion } from '../catalog/catalog-read.service.js';
import { type ChunkRow, type CollectionRow, chunkFromRow, generationOfRow, keyPatternOfRow } from '../catalog/catalog-rows.js';
import { MetadataCommitService } from '../catalog/metadata-commit.service.js';
import type { FencedTransaction } from '../ddl/ddl-coordinator.js';
import { ClusterSettingsService } from '../settings/cluster-settings.service.js';

/** How long the config server waits for a donor to finish a migration. */
const MIGRATION_TIMEOUT_MS = 3_600_000;
/** A registered migration its donor does not run is stale only when older than this (the donor may not have been called yet). */
const STALE_AFTER_MS = 5_000;
/** How often a DDL waiting for a collection's migrations to end looks again, and how often it says it is still waiting. */
const DRAIN_POLL_MS = 100;
const DRAIN_LOG_MS = 10_000;

interface Target {
  ns: string;
  uuid: string;
  chunk: Chunk;
  range: ChunkRange;
  maxChunkSizeBytes: number;
  donorUrl: string;
  recipientUrl: string;
}

/**
 * The config server's side of migrations: moveRange and moveChunk find the chunk (splitting
 * first when asked to move a sub-range), check the recipient, record the migration in
 * `active_migrations` (one per chunk, so a retry joins it and another is refused), and hand it
 * to the donor, which runs the protocol and commits. `decide` answers a recovering donor.
 */
@Injectable()
export class MigrationManagerService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly commits: MetadataCommitService,
    private readonly settings: ClusterSettingsService,
    private readonly clients: InternalClients,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  /**
   * `options.reason` (the balancer's: `imbalance`, `topChunk`, ...) is kept with the active
   * migration so that the commit's changelog row says why; users' requests have none.
   */
  async moveRange(input: MoveRangeRequest, options: { reason?: string } = {}): Promise<MoveRangeResult> {
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
    return this.migrate(target, request.toShard, request.forceJumbo, request.waitForDelete, options.reason);
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

  /** The decision of a migration; records `aborted` when none was made (see migration_decisions). */
  async decide(input: unknown): Promise<{ decision: MigrationDecision }> {
    const { migrationId } = parseWith(decideMigrationRequestSchema, input, 'decideMigration request');
    await this.dataSource.query(`INSERT INTO migration_decisions (id, decision) VALUES ($1, 'aborted') ON CONFLICT (id) DO NOTHING`, [
      migrationId,
    ]);
    const rows: Array<{ decision: MigrationDecision }> = await this.dataSource.query(
      'SELECT decision FROM migration_decisions WHERE id = $1',
      [migrationId],
    );
    return { decision: rows[0]!.decision };
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
    reason?: string,
  ): Promise<MoveRangeResult> {
    const range = await this.splitOff(target);
    const migrationId = await this.register(target, range, toShard, forceJumbo, waitForDelete, reason);
    const donor = this.clients.migration(target.donorUrl, MIGRATION_TIMEOUT_MS);
    let settled = true;
    try {
      return await donor.moveRange({
        migrationId,
        ns: target.ns,
        collectionUuid: target.uuid,
        range: chunkRangeToWire(range),
        recipient: toShard,
        recipientUrl: target.recipientUrl,
        forceJumbo,
        waitForDelete,
        maxChunkSizeBytes: target.maxChunkSizeBytes,
      });
    } catch (error) {
      // Unreachable: the donor may still be running it; its registration stays until it ends.
      settled = !(error instanceof TesseraError && (error.code === 'HOST_UNREACHABLE' || error.code === 'NETWORK_TIMEOUT'));
      throw error;
    } finally {
      if (settled) {
        await this.dataSource.query('DELETE FROM active_migrations WHERE id = $1', [migrationId]);
        await this.dataSource.query('DELETE FROM migration_decisions WHERE id = $1', [migrationId]);
      }
    }
  }

  /**
   * For a DDL that must not run beside a migration of the collection (dropCollection,
   * refineCollectionShardKey; MongoDB's DDL coordinators stop and drain migrations the same way):
   * turns `allow_migrations` off in `inFencedTransaction`, then waits until every migration
   * registered for the collection has ended. None can start meanwhile (register checks the flag),
   * and one in flight cannot commit (commitMigration checks it), so the wait is about as long as
   * the migrations' remaining cloning. A record whose donor does not run it is dropped as stale;
   * an unreachable donor is waited for, as its recovery decides the migration.
   */
  async stopMigrations(uuid: string, inFencedTransaction: FencedTransaction): Promise<void> {
    await inFencedTransaction((manager) =>
      manager.query('UPDATE collections SET allow_migrations = false, updated_at = now() WHERE uuid = $1', [uuid]),
    );
    const started = Date.now();
    let logged = started;
    for (;;) {
      const rows: Array<{ id: string; ns: string; donor_url: string; stale: boolean }> = await this.dataSource.query(
        `SELECT a.id, a.ns, s.url AS donor_url, a.started_at < now() - make_interval(secs => $2) AS stale
           FROM active_migrations a JOIN shards s ON s.name = a.donor WHERE a.collection_uuid = $1`,
        [uuid, STALE_AFTER_MS / 1000],
      );
      if (rows.length === 0) return;
      // An unreachable donor keeps its record: its recovery decides the migration.
      for (const row of rows.filter((r) => r.stale)) await this.dropIfStale(row.id, row.donor_url).catch(() => false);
      if (Date.now() - logged >= DRAIN_LOG_MS) {
        logged = Date.now();
        this.logger.info(
          { migrations: rows.map((r) => r.id) },
          `${rows[0]!.ns}: waiting ${Math.round((logged - started) / 1000)} s for ${rows.length} migration(s) to end before the DDL operation goes on`,
        );
      }
      await sleep(DRAIN_POLL_MS);
    }
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
   * joins the registered migration; to another shard, it is refused while the donor still runs
   * the registered one, and the record is dropped as stale when the donor does not.
   */
  private async register(
    target: Target,
    range: ChunkRange,
    toShard: string,
    forceJumbo: boolean,
    waitForDelete: boolean,
    reason: string | undefined,
  ): Promise<string> {
    for (;;) {
      const migrationId = randomUUID();
      // Only while the collection allows migrations: FOR SHARE makes a DDL that turns them off
      // (stopMigrations) wait for this insert, and this insert see the DDL's change.
      const inserted: unknown[] = await this.dataSource.query(
        `INSERT INTO active_migrations (id, ns, collection_uuid, min, max, min_ejson, max_ejson, donor, recipient, force_jumbo, wait_for_delete, reason)
         SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12 FROM collections WHERE uuid = $3 AND allow_migrations FOR SHARE
         ON CONFLICT DO NOTHING RETURNING id`,
        [
          migrationId,
          target.ns,
          target.uuid,
          Buffer.from(encodeKey(range.min)),
          Buffer.from(encodeKey(range.max)),
          JSON.stringify(shardKeyToWire(range.min)),
          JSON.stringify(shardKeyToWire(range.max)),
          target.chunk.shard,
          toShard,
          forceJumbo,
          waitForDelete,
          reason ?? null,
        ],
      );
      if (inserted.length > 0) return migrationId;
      const allowed: unknown[] = await this.dataSource.query('SELECT 1 FROM collections WHERE uuid = $1 AND allow_migrations', [
        target.uuid,
      ]);
      if (allowed.length === 0) throw migrationsNotAllowed(target.ns);
      const rows: Array<{ id: string; recipient: string; donor: string }> = await this.dataSource.query(
        'SELECT id, recipient, donor FROM active_migrations WHERE collection_uuid = $1 AND min = $2',
        [target.uuid, Buffer.from(encodeKey(range.min))],
      );
      const active = rows[0];
      if (active === undefined) continue;
      if (active.recipient === toShard) return active.id;
      if (!(await this.dropIfStale(active.id, target.donorUrl))) {
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

  /** Drops the record of migration `id` if its donor answers that it is not running it; answers whether it did. */
  private async dropIfStale(id: string, donorUrl: string): Promise<boolean> {
    const status = await this.clients.migration(donorUrl).status();
    if (status.active?.migrationId === id) return false;
    this.logger.warn({ migrationId: id }, `dropping the stale record of migration ${id} (its donor is not running it)`);
    await this.dataSource.query('DELETE FROM active_migrations WHERE id = $1', [id]);
    return true;
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
