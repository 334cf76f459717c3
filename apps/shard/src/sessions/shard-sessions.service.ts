import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type { Logger } from 'pino';
import type { ConfigClient } from '@tessera/protocol';
import {
  InternalClients,
  LOGGER,
  LogicalSessionCache,
  MetricsService,
  type Periodic,
  SETTINGS,
  SessionMetrics,
  advertisedUrl,
  runPeriodically,
} from '@tessera/platform';
import { ShardIdentityService } from '../identity/shard-identity.service.js';
import type { ShardSettings } from '../shard.settings.js';
import { SessionRecords } from './session-records.service.js';

/** Sessions the reaper asks the config server about at a time. */
const REAP_BATCH = 1_000;

/**
 * The shard's logical sessions (sharding-internals.md, "The logical session cache"): the
 * sessions its retryable writes named, refreshed with the config server's sessions table every
 * `logicalSessionRefreshMillis`, and then the reap: records of the transactions table whose last
 * write is older than the session timeout are removed when their session is no longer in the
 * sessions table (expired or ended). A shard not yet added to a cluster has nothing to refresh.
 */
@Injectable()
export class ShardSessions implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly cache: LogicalSessionCache;
  private readonly metrics: SessionMetrics;
  private loop: Periodic | undefined;

  constructor(
    private readonly records: SessionRecords,
    private readonly identity: ShardIdentityService,
    private readonly clients: InternalClients,
    @Inject(SETTINGS) private readonly settings: ShardSettings,
    @Inject(LOGGER) private readonly logger: Logger,
    metrics: MetricsService,
  ) {
    this.cache = new LogicalSessionCache({
      node: settings.TESSERA_NODE_NAME ?? advertisedUrl(settings),
      role: 'shard',
      now: () => Date.now(),
      refresh: async (request) => (await this.config())!.refreshSessions(request),
      // Shard cursors are the routers' to kill with their sessions.
      openCursors: () => 0,
      killCursors: async () => undefined,
    });
    this.metrics = new SessionMetrics(metrics, this.cache);
  }

  onApplicationBootstrap(): void {
    if (this.settings.TESSERA_DISABLE_LOGICAL_SESSION_CACHE_REFRESH) return;
    this.loop = runPeriodically(
      () => this.refreshAndReap(),
      this.settings.TESSERA_LOGICAL_SESSION_REFRESH_MILLIS,
      (error) => this.logger.warn({ err: error }, `logical session refresh or reap failed: ${(error as Error).message}; will retry`),
    );
  }

  onApplicationShutdown(): void {
    this.loop?.stop();
  }

  /** A retryable write named the session. */
  use(lsid: string, txnNumber: number): void {
    this.cache.vivify(lsid, txnNumber);
  }

  /** `statements` of a retryable write of the session were answered from its history. */
  noteRetryAnswered(lsid: string, statements: number): void {
    this.cache.noteRetryAnswered(lsid);
    this.metrics.retriedStatements.inc(statements);
  }

  /** One period: the refresh, then the reap. Public for tests. */
  async refreshAndReap(): Promise<void> {
    if ((await this.config()) === undefined) return;
    await this.cache.refresh();
    await this.reap();
  }

  /** The reap: stale records of sessions the sessions table no longer holds are removed. */
  async reap(): Promise<string[]> {
    const config = (await this.config())!;
    const cutoff = new Date(Date.now() - this.cache.timeoutMinutes * 60_000);
    const reaped: string[] = [];
    for (;;) {
      const stale = (await this.records.staleSessions(cutoff, REAP_BATCH)).filter((id) => !reaped.includes(id));
      if (stale.length === 0) break;
      const { live } = await config.liveSessions({ ids: stale });
      const gone = stale.filter((id) => !live.includes(id));
      reaped.push(...(await this.records.reap(gone, cutoff)));
      if (stale.length < REAP_BATCH || gone.length === 0) break;
    }
    if (reaped.length > 0) {
      this.cache.noteReaped(reaped);
      this.logger.info({ sessions: reaped.length }, `reaped the retryable-write records of ${reaped.length} expired session(s)`);
    }
    return reaped;
  }

  private async config(): Promise<ConfigClient | undefined> {
    const identity = await this.identity.get();
    return identity === null ? undefined : this.clients.config(identity.configUrl, 10_000);
  }
}
