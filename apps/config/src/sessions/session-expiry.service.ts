import { Inject, Injectable, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import type { Logger } from 'pino';
import { DataSource } from 'typeorm';
import { LOGGER, SETTINGS } from '@tessera/platform';
import { ChangelogService } from '../changelog/changelog.service.js';
import type { ConfigSettings } from '../config.settings.js';
import { LeaderService } from '../leader/leader.service.js';
import { LeaderPeriodic } from '../leader/leader-periodic.js';
import { sessionChangelogEntries } from './session-changelog.js';
import { SessionsStore } from './sessions.store.js';

/** Sessions one transaction expires at most, so that no statement holds the table for long. */
const EXPIRE_BATCH = 1_000;

/**
 * The sessions table's TTL index: on the leader, every `TESSERA_LOGICAL_SESSION_REFRESH_MILLIS`,
 * deletes the sessions unused for `TESSERA_LOCAL_LOGICAL_SESSION_TIMEOUT_MINUTES`, with
 * `session.expired` changelog rows in the same transaction. The nodes that cache them learn it
 * at their next refresh (`expired`), and shards reap their records once `liveSessions` no
 * longer names them.
 */
@Injectable()
export class SessionExpiryService implements OnModuleInit, OnApplicationShutdown {
  private readonly loop: LeaderPeriodic;

  constructor(
    private readonly dataSource: DataSource,
    private readonly store: SessionsStore,
    private readonly changelog: ChangelogService,
    private readonly leader: LeaderService,
    @Inject(SETTINGS) private readonly settings: ConfigSettings,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {
    this.loop = new LeaderPeriodic(
      'session expiry',
      async () => {
        const expired = await this.expire();
        if (expired > 0) this.logger.info({ expired }, `sessions: ${expired} unused sessions expired`);
      },
      this.settings.TESSERA_LOGICAL_SESSION_REFRESH_MILLIS,
      (error) => this.logger.warn({ err: error }, `expiring sessions failed: ${(error as Error).message}`),
    );
  }

  onModuleInit(): void {
    this.leader.register(this.loop);
  }

  onApplicationShutdown(): void {
    this.loop.stop();
  }

  /** Deletes every session unused for the timeout, a batch per transaction; answers how many went. */
  async expire(): Promise<number> {
    const timeoutMinutes = this.settings.TESSERA_LOCAL_LOGICAL_SESSION_TIMEOUT_MINUTES;
    let expired = 0;
    for (;;) {
      const count = await this.dataSource.transaction(async (manager) => {
        const ids = await this.store.expire(manager, timeoutMinutes * 60_000, EXPIRE_BATCH);
        for (const entry of sessionChangelogEntries('session.expired', ids, { timeoutMinutes }))
          await this.changelog.record(manager, entry);
        return ids.length;
      });
      expired += count;
      if (count < EXPIRE_BATCH) return expired;
    }
  }
}
