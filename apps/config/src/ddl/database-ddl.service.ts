import { Inject, Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { DataSource, type EntityManager } from 'typeorm';
import { TesseraError } from '@tessera/core';
import {
  type DatabaseDescription,
  type DropResult,
  type EnableShardingRequest,
  type MovePrimaryRequest,
  dropDatabaseRequestSchema,
  enableShardingRequestSchema,
  movePrimaryRequestSchema,
} from '@tessera/protocol';
import { LOGGER, parseWith } from '@tessera/platform';
import { ChangelogService } from '../changelog/changelog.service.js';
import { ConfigClockService } from '../clock/config-clock.service.js';
import { type DatabaseRow, databaseVersionOfRow } from '../catalog/catalog-rows.js';
import { databaseLock } from '../catalog/namespace.js';
import { DistLockService } from '../locks/dist-lock.service.js';
import { LeaderService } from '../leader/leader.service.js';
import { DatabaseCatalogStore } from './database-catalog.store.js';
import { DdlCoordinatorService } from './ddl-coordinator.service.js';
import { ShardDirectory } from './shard-directory.js';

/**
 * Database DDL: creation (implicit on first write, or `enableSharding`), and the entry points of
 * `dropDatabase` and `movePrimary`, which their coordinators run (`drop-database.coordinator.ts`,
 * `move-primary.coordinator.ts`). A new database's primary shard is the active shard holding the
 * least data (sharding-internals.md, "Database creation").
 */
@Injectable()
export class DatabaseDdlService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly coordinators: DdlCoordinatorService,
    private readonly leader: LeaderService,
    private readonly locks: DistLockService,
    private readonly catalog: DatabaseCatalogStore,
    private readonly shards: ShardDirectory,
    private readonly clock: ConfigClockService,
    private readonly changelog: ChangelogService,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  /**
   * Creates the database if it does not exist, on `primaryShard` or else on the shard with the
   * least data; answers it as it is. Refuses a name that differs only in case from an existing
   * database, an unknown or draining primary shard, and a different primary for an existing one.
   */
  async enableSharding(input: EnableShardingRequest): Promise<DatabaseDescription> {
    const request = parseWith(enableShardingRequestSchema, input, 'enableSharding request');
    await this.leader.assertLeader();
    const row = await this.catalog.find(request.db);
    const existing = row && describeDatabase(row);
    if (existing !== undefined && (request.primaryShard === undefined || existing.primaryShard === request.primaryShard)) return existing;
    const operation = randomUUID();
    const lock = await this.locks.acquire(databaseLock(request.db), operation, `createDatabase ${request.db}`);
    try {
      return await this.dataSource.transaction((manager) => this.createDatabaseLocked(manager, request.db, request.primaryShard));
    } finally {
      await lock.release();
    }
  }

  /** Creates the database inside `manager`'s transaction; the caller holds the database's lock. */
  async createDatabaseLocked(manager: EntityManager, name: string, primaryShard?: string): Promise<DatabaseDescription> {
    const existing = await this.catalog.findIgnoringCase(manager, name);
    if (existing !== undefined) return checkExisting(existing, name, primaryShard);
    const primary = primaryShard ?? (await this.leastLoadedShard(manager));
    await this.shards.assertActive(primary, manager);
    const inserted = await this.catalog.insert(manager, name, primary);
    await this.clock.tick(manager);
    await this.changelog.record(manager, { what: 'createDatabase', ns: name, shard: primary, details: { primaryShard: primary } });
    this.logger.info({ db: name, primary }, `created database ${name} on ${primary}`);
    return describeDatabase(inserted);
  }

  dropDatabase(input: unknown): Promise<DropResult> {
    const request = parseWith(dropDatabaseRequestSchema, input, 'dropDatabase request');
    return this.coordinators.run('dropDatabase', request);
  }

  movePrimary(input: MovePrimaryRequest): Promise<DatabaseDescription> {
    const request = parseWith(movePrimaryRequestSchema, input, 'movePrimary request');
    return this.coordinators.run('movePrimary', request);
  }

  /** The active shard that reports the least data within 2 s; one that does not answer is left out. */
  private async leastLoadedShard(manager: EntityManager): Promise<string> {
    const shards = await this.shards.active(manager, 2_000);
    if (shards.length === 0) throw new TesseraError('SHARD_NOT_FOUND', 'the cluster has no active shard to hold a new database');
    const sizes = await Promise.all(
      shards.map(async (s) => ({
        name: s.name,
        bytes: await s.client.stats().then(
          (st) => st.dataSizeBytes,
          () => undefined,
        ),
      })),
    );
    const reachable = sizes.filter((s): s is { name: string; bytes: number } => s.bytes !== undefined);
    if (reachable.length === 0)
      throw new TesseraError('HOST_UNREACHABLE', 'no active shard answers, so no primary shard can be chosen for a new database');
    return reachable.reduce((best, s) => (s.bytes < best.bytes ? s : best)).name;
  }
}

/** The database as DDL answers it. */
export function describeDatabase(row: DatabaseRow): DatabaseDescription {
  return { name: row.name, primaryShard: row.primary_shard, version: databaseVersionOfRow(row) };
}

/**
 * An existing database answers a creation as it is, unless its name differs in case from the
 * requested one or it has another primary than the one asked for.
 */
function checkExisting(existing: DatabaseRow, name: string, primaryShard: string | undefined): DatabaseDescription {
  if (existing.name !== name) {
    throw new TesseraError('ILLEGAL_OPERATION', `database "${name}" differs only in case from existing database "${existing.name}"`, {
      details: { existing: existing.name },
    });
  }
  if (primaryShard !== undefined && existing.primary_shard !== primaryShard) {
    throw new TesseraError(
      'ILLEGAL_OPERATION',
      `database "${name}" already exists with primary shard "${existing.primary_shard}"; use movePrimary to change it`,
      { details: { primaryShard: existing.primary_shard } },
    );
  }
  return describeDatabase(existing);
}
