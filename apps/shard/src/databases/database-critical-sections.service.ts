import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import type { Logger } from 'pino';
import { TesseraError } from '@tessera/core';
import { LOGGER, parseWith } from '@tessera/platform';
import { enterDatabaseCriticalSectionSchema, exitDatabaseCriticalSectionSchema } from '@tessera/protocol';
import { ShardingRuntime } from '../sharding/sharding-runtime.service.js';
import { DatabaseCriticalSectionStore } from './database-critical-section.store.js';

/**
 * movePrimary's critical section on the old primary (MongoDB's database critical section,
 * `_shardsvrMovePrimaryEnterCriticalSection` / `...ExitCriticalSection`): persisted before it
 * is taken, and taken again at start, so a shard killed mid-move keeps its unsharded
 * collections still until the coordinator releases them. Writes wait from the clone on; reads
 * too from just before the commit, so none is served from the old primary afterwards.
 */
@Injectable()
export class DatabaseCriticalSections implements OnModuleInit {
  constructor(
    private readonly store: DatabaseCriticalSectionStore,
    private readonly runtime: ShardingRuntime,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  async onModuleInit(): Promise<void> {
    for (const row of await this.store.all()) {
      await this.runtime.enterDatabaseCriticalSection(row.db, row.reason, row.blocksReads);
      this.logger.info(row, `database ${row.db} is in movePrimary's critical section (${row.reason}) since before this start`);
    }
  }

  /** Takes or strengthens the section for the request's reason; resolves once no write is under way on the database's unsharded collections. */
  async enter(db: string, input: unknown): Promise<{ ok: 1 }> {
    const { reason, blockReads } = parseWith(enterDatabaseCriticalSectionSchema, input, 'enterCriticalSection request');
    const holder = await this.store.hold(db, reason, blockReads);
    if (holder !== reason) {
      throw new TesseraError('CONFLICTING_OPERATION', `the critical section of database ${db} is held by another operation (${holder})`, {
        details: { db, heldBy: holder },
      });
    }
    await this.runtime.enterDatabaseCriticalSection(db, reason, blockReads);
    return { ok: 1 };
  }

  /**
   * Releases the section held for the request's reason. The database's routing metadata is
   * forgotten first: operations that waited check their database version against the catalog
   * as it is now, so after a committed move they are told they are stale instead of being served
   * here.
   */
  async exit(db: string, input: unknown): Promise<{ ok: 1 }> {
    const { reason } = parseWith(exitDatabaseCriticalSectionSchema, input, 'exitCriticalSection request');
    (await this.runtime.state()).invalidateDatabase(db);
    await this.store.release(db, reason);
    this.runtime.exitDatabaseCriticalSection(db, reason);
    return { ok: 1 };
  }
}
