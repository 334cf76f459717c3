import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
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
import { InternalClients, LOGGER, parseWith, queryRows } from '@tessera/platform';
import { ChangelogService } from '../changelog/changelog.service.js';
import { ConfigClockService } from '../clock/config-clock.service.js';
import { type DatabaseRow, databaseVersionOfRow } from '../catalog/catalog-rows.js';
import { databaseLock } from '../catalog/namespace.js';
import { DistLockService } from '../locks/dist-lock.service.js';
import { LeaderService } from '../leader/leader.service.js';
import type { FencedTransaction } from './ddl-coordinator.js';
import { DdlCoordinatorService } from './ddl-coordinator.service.js';
import { CollectionDropper } from './collection-dropper.js';

interface DropDatabaseState {
  found: boolean;
  collections: string[];
}

interface MovePrimaryArgs {
  db: string;
  to: string;
}

interface MovePrimaryState {
  from: string | null;
  database?: DatabaseDescription;
}

/**
 * Database DDL: creation (implicit on first write, or `enableSharding`), `dropDatabase` and
 * `movePrimary`. A new database's primary shard is the active shard holding the least data
 * (sharding-internals.md, "Database creation").
 */
@Injectable()
export class DatabaseDdlService implements OnModuleInit {
  constructor(
    private readonly dataSource: DataSource,
    private readonly coordinators: DdlCoordinatorService,
    private readonly leader: LeaderService,
    private readonly locks: DistLockService,
    private readonly clock: ConfigClockService,
    private readonly changelog: ChangelogService,
    private readonly clients: InternalClients,
    private readonly dropper: CollectionDropper,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  onModuleInit(): void {
    this.coordinators.define<{ db: string }, DropDatabaseState, DropResult>({
      kind: 'dropDatabase',
      phases: ['prepare', 'dropCollections', 'dropOnShards', 'removeMetadata'],
      resources: (request) => [databaseLock(request.db)],
      initialState: () => ({ found: false, collections: [] }),
      runPhase: (phase, context) => this.runDropDatabasePhase(phase, context.request.db, context.state, context.inFencedTransaction),
      result: (state) => ({ dropped: state.found }),
    });
    this.coordinators.define<MovePrimaryArgs, MovePrimaryState, DatabaseDescription>({
      kind: 'movePrimary',
      phases: ['prepare', 'commit'],
      resources: (request) => [databaseLock(request.db)],
      initialState: () => ({ from: null }),
      runPhase: (phase, context) => this.runMovePrimaryPhase(phase, context.request, context.state, context.inFencedTransaction),
      // The commit phase records the database as it is afterwards.
      result: (state) => state.database!,
    });
  }

  /**
   * Creates the database if it does not exist, on `primaryShard` or else on the shard with the
   * least data; answers it as it is. Refuses a name that differs only in case from an existing
   * database, an unknown or draining primary shard, and a different primary for an existing one.
   */
  async enableSharding(input: EnableShardingRequest): Promise<DatabaseDescription> {
    const request = parseWith(enableShardingRequestSchema, input, 'enableSharding request');
    await this.leader.assertLeader();
    const existing = await this.find(this.dataSource.manager, request.db);
    if (existing !== undefined && (request.primaryShard === undefined || existing.primaryShard === request.primaryShard)) return existing;
    const operation = randomUUID();
    const lock = await this.locks.acquire(databaseLock(request.db), operation, `createDatabase ${request.db}`);
    try {
      return await this.dataSource.transaction((manager) => this.createDatabaseLocked(manager, request.db, request.primaryShard));
    } finally {
      await lock.release();
    }
  }

  /** The database if it exists. */
  async find(manager: EntityManager, name: string): Promise<DatabaseDescription | undefined> {
    const rows: DatabaseRow[] = await manager.query('SELECT * FROM databases WHERE name = $1', [name]);
    return rows[0] && describeDatabase(rows[0]);
  }

  /** Creates the database inside `manager`'s transaction; the caller holds the database's lock. */
  async createDatabaseLocked(manager: EntityManager, name: string, primaryShard?: string): Promise<DatabaseDescription> {
    const rows: DatabaseRow[] = await manager.query('SELECT * FROM databases WHERE lower(name) = lower($1)', [name]);
    const existing = rows[0];
    if (existing !== undefined) {
      if (existing.name !== name) {
        throw new TesseraError('ILLEGAL_OPERATION', `database "${name}" differs only in case from existing database "${existing.name}"`, {
          details: { existing: existing.name },
        });
      }
      if (primaryShard !== undefined && existing.primary_shard !== primaryShard) {
        throw new TesseraError(
          'ILLEGAL_OPERATION',
          `database "${name}" already exists with primary shard "${existing.primary_shard}"; use movePrimary to change it`,
          {
            details: { primaryShard: existing.primary_shard },
          },
        );
      }
      return describeDatabase(existing);
    }
    const primary = primaryShard ?? (await this.leastLoadedShard(manager));
    await this.assertActiveShard(manager, primary);
    const inserted: DatabaseRow[] = await manager.query(
      'INSERT INTO databases (name, primary_shard, version_uuid, version_last_mod) VALUES ($1, $2, $3, 1) RETURNING *',
      [name, primary, randomUUID()],
    );
    await this.clock.tick(manager);
    await this.changelog.record(manager, { what: 'createDatabase', ns: name, shard: primary, details: { primaryShard: primary } });
    this.logger.info({ db: name, primary }, `created database ${name} on ${primary}`);
    return describeDatabase(inserted[0]!);
  }

  dropDatabase(input: unknown): Promise<DropResult> {
    const request = parseWith(dropDatabaseRequestSchema, input, 'dropDatabase request');
    return this.coordinators.run('dropDatabase', request);
  }

  movePrimary(input: MovePrimaryRequest): Promise<DatabaseDescription> {
    const request = parseWith(movePrimaryRequestSchema, input, 'movePrimary request');
    return this.coordinators.run('movePrimary', request);
  }

  private async runMovePrimaryPhase(
    phase: string,
    request: MovePrimaryArgs,
    state: MovePrimaryState,
    inFencedTransaction: FencedTransaction,
  ): Promise<MovePrimaryState> {
    switch (phase) {
      case 'prepare': {
        const database = await this.find(this.dataSource.manager, request.db);
        if (database === undefined)
          throw new TesseraError('NAMESPACE_NOT_FOUND', `database "${request.db}" does not exist`, { details: { db: request.db } });
        await this.assertActiveShard(this.dataSource.manager, request.to);
        if (database.primaryShard !== request.to) await this.assertNoUnshardedData(request.db, database.primaryShard);
        return { from: database.primaryShard, database };
      }
      case 'commit':
        return inFencedTransaction(async (manager) => {
          const rows: DatabaseRow[] = await manager.query('SELECT * FROM databases WHERE name = $1 FOR UPDATE', [request.db]);
          const row = rows[0];
          if (row === undefined) throw new TesseraError('NAMESPACE_NOT_FOUND', `database "${request.db}" does not exist`);
          // Repeating the phase after a failover finds the move already committed.
          if (row.primary_shard === request.to) return { ...state, database: describeDatabase(row) };
          const updated: DatabaseRow[] = await queryRows(
            manager,
            'UPDATE databases SET primary_shard = $2, version_last_mod = version_last_mod + 1 WHERE name = $1 RETURNING *',
            [request.db, request.to],
          );
          await this.clock.tick(manager);
          await this.changelog.record(manager, {
            what: 'movePrimary',
            ns: request.db,
            shard: request.to,
            details: { from: row.primary_shard, to: request.to },
          });
          return { ...state, database: describeDatabase(updated[0]!) };
        });
      default:
        throw new TesseraError('INTERNAL', `movePrimary has no phase ${phase}`);
    }
  }

  private async runDropDatabasePhase(
    phase: string,
    db: string,
    state: DropDatabaseState,
    inFencedTransaction: FencedTransaction,
  ): Promise<DropDatabaseState> {
    switch (phase) {
      case 'prepare': {
        const database = await this.find(this.dataSource.manager, db);
        const collections: Array<{ ns: string }> = await this.dataSource.query('SELECT ns FROM collections WHERE db = $1 ORDER BY ns', [
          db,
        ]);
        return { found: database !== undefined, collections: collections.map((c) => c.ns) };
      }
      case 'dropCollections':
        for (const ns of state.collections) await this.dropper.dropCollectionLocked(ns, inFencedTransaction);
        return state;
      case 'dropOnShards': {
        const shards: Array<{ url: string }> = await this.dataSource.query('SELECT url FROM shards');
        await Promise.all(shards.map((s) => this.clients.shard(s.url).dropDatabase(db)));
        return state;
      }
      case 'removeMetadata':
        await inFencedTransaction(async (manager) => {
          const deleted: unknown[] = await queryRows(manager, 'DELETE FROM databases WHERE name = $1 RETURNING name', [db]);
          if (deleted.length === 0) return;
          await manager.query("DELETE FROM tags WHERE left(ns, length($1) + 1) = $1 || '.'", [db]);
          await this.clock.tick(manager);
          await this.changelog.record(manager, { what: 'dropDatabase', ns: db, details: { collections: state.collections } });
        });
        return state;
      default:
        throw new TesseraError('INTERNAL', `dropDatabase has no phase ${phase}`);
    }
  }

  /**
   * Cloning unsharded collections to a new primary is not built yet; moving the primary of a
   * database that has some would leave them where routers no longer look, so it is refused.
   */
  private async assertNoUnshardedData(db: string, primary: string): Promise<void> {
    const rows: Array<{ url: string }> = await this.dataSource.query('SELECT url FROM shards WHERE name = $1', [primary]);
    if (rows[0] === undefined) return;
    const stored = await this.clients.shard(rows[0].url).namespacesOf(db);
    const sharded: Array<{ ns: string }> = await this.dataSource.query('SELECT ns FROM collections WHERE db = $1', [db]);
    const unsharded = stored.filter((ns) => !sharded.some((s) => s.ns === ns));
    if (unsharded.length > 0) {
      throw new TesseraError(
        'ILLEGAL_OPERATION',
        `movePrimary of "${db}" is refused: its primary shard "${primary}" holds unsharded collections (${unsharded.join(', ')}), and moving them is not supported yet; shard or drop them first`,
        { details: { db, primaryShard: primary, unsharded } },
      );
    }
  }

  private async leastLoadedShard(manager: EntityManager): Promise<string> {
    const shards: Array<{ name: string; url: string }> = await manager.query(
      "SELECT name, url FROM shards WHERE state = 'active' ORDER BY name",
    );
    if (shards.length === 0) throw new TesseraError('SHARD_NOT_FOUND', 'the cluster has no active shard to hold a new database');
    const sizes = await Promise.all(
      shards.map(async (s) => ({
        name: s.name,
        bytes: await this.clients
          .shard(s.url, 2_000)
          .stats()
          .then(
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

  private async assertActiveShard(manager: EntityManager, name: string): Promise<void> {
    const rows: Array<{ state: string }> = await manager.query('SELECT state FROM shards WHERE name = $1', [name]);
    if (rows[0] === undefined) throw new TesseraError('SHARD_NOT_FOUND', `no shard named "${name}"`, { details: { shard: name } });
    if (rows[0].state !== 'active')
      throw new TesseraError('ILLEGAL_OPERATION', `shard "${name}" is draining and cannot take new data`, { details: { shard: name } });
  }
}

export function describeDatabase(row: DatabaseRow): DatabaseDescription {
  return { name: row.name, primaryShard: row.primary_shard, version: databaseVersionOfRow(row) };
}
