import { Inject, Injectable, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import type { Logger } from 'pino';
import { DataSource } from 'typeorm';
import { LOGGER, type Queryable, SETTINGS, queryRows } from '@tessera/platform';
import type { ConfigSettings } from '../config.settings.js';
import { LeaderService } from '../leader/leader.service.js';
import { LeaderPeriodic } from '../leader/leader-periodic.js';

/** Rows one DELETE removes at most, so that no statement holds the changelog for long. */
const PRUNE_BATCH = 10_000;

/**
 * Deletes the changelog's oldest rows beyond its newest `maxRows` (by `seq`, which is commit
 * order), `batch` rows per statement; answers how many went.
 */
export async function pruneChangelog(db: Queryable, maxRows: number, batch = PRUNE_BATCH): Promise<number> {
  let deleted = 0;
  for (;;) {
    const [row] = await queryRows<{ n: number }>(
      db,
      `WITH doomed AS (
         SELECT id FROM changelog
          WHERE seq <= (SELECT seq FROM changelog WHERE seq IS NOT NULL ORDER BY seq DESC OFFSET $1 LIMIT 1)
          ORDER BY seq LIMIT $2),
       gone AS (DELETE FROM changelog c USING doomed WHERE c.id = doomed.id RETURNING 1)
       SELECT count(*)::int AS n FROM gone`,
      [maxRows, batch],
    );
    const count = row?.n ?? 0;
    deleted += count;
    if (count < batch) return deleted;
  }
}

/**
 * Keeps the changelog to its newest `TESSERA_CHANGELOG_MAX_ROWS` rows, as MongoDB keeps
 * config.changelog a capped collection: on the leader, every
 * `TESSERA_CHANGELOG_PRUNE_INTERVAL_MS`. Without it the balancer's round rows alone would grow
 * the table without end. An event stream resumed from a pruned `seq` starts at the oldest row kept.
 */
@Injectable()
export class ChangelogRetentionService implements OnModuleInit, OnApplicationShutdown {
  private readonly loop: LeaderPeriodic;

  constructor(
    private readonly dataSource: DataSource,
    private readonly leader: LeaderService,
    @Inject(SETTINGS) private readonly settings: ConfigSettings,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {
    this.loop = new LeaderPeriodic(
      'changelog retention',
      async () => {
        const deleted = await pruneChangelog(this.dataSource, this.settings.TESSERA_CHANGELOG_MAX_ROWS);
        if (deleted > 0)
          this.logger.info({ deleted }, `changelog: ${deleted} rows beyond the newest ${this.settings.TESSERA_CHANGELOG_MAX_ROWS} deleted`);
      },
      this.settings.TESSERA_CHANGELOG_PRUNE_INTERVAL_MS,
      (error) => this.logger.warn({ err: error }, `changelog pruning failed: ${(error as Error).message}`),
    );
  }

  onModuleInit(): void {
    this.leader.register(this.loop);
  }

  onApplicationShutdown(): void {
    this.loop.stop();
  }
}
