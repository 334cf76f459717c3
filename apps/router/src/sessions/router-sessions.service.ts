import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
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
import { type CommandSession, type SessionFieldsBody, sessionOf } from '../api/session-fields.js';
import type { RouterSettings } from '../router.settings.js';

/** The router's cursors as the session cache sees them (QueryService attaches its registry). */
export interface SessionCursors {
  openCursors(sessionId: string): number;
  killSessions(sessionIds: readonly string[]): Promise<void>;
}

/**
 * The router's logical sessions: every command that names an lsid places it in the cache (or
 * notes its use), the cache syncs with the config server every `logicalSessionRefreshMillis`, and
 * the cursors of sessions ended here or expired are killed then. Also MongoDB's session commands:
 * startSession, endSessions, refreshSessions, killSessions.
 */
@Injectable()
export class RouterSessions implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly cache: LogicalSessionCache;
  private readonly metrics: SessionMetrics;
  private cursors: SessionCursors | undefined;
  private loop: Periodic | undefined;

  constructor(
    @Inject(SETTINGS) private readonly settings: RouterSettings,
    @Inject(LOGGER) private readonly logger: Logger,
    clients: InternalClients,
    metrics: MetricsService,
  ) {
    const config = clients.config(settings.TESSERA_CONFIG_URL, 10_000);
    this.cache = new LogicalSessionCache({
      node: settings.TESSERA_NODE_NAME ?? advertisedUrl(settings),
      role: 'router',
      now: () => Date.now(),
      refresh: (request) => config.refreshSessions(request),
      openCursors: (id) => this.cursors?.openCursors(id) ?? 0,
      killCursors: async (ids) => this.cursors?.killSessions(ids),
    });
    this.metrics = new SessionMetrics(metrics, this.cache);
  }

  onApplicationBootstrap(): void {
    if (this.settings.TESSERA_DISABLE_LOGICAL_SESSION_CACHE_REFRESH) return;
    this.loop = runPeriodically(
      async () => {
        const gone = await this.cache.refresh();
        if (gone.length > 0)
          this.logger.info({ sessions: gone.length }, `${gone.length} session(s) ended or expired; their cursors killed`);
      },
      this.settings.TESSERA_LOGICAL_SESSION_REFRESH_MILLIS,
      (error) => this.logger.warn({ err: error }, `logical session cache refresh failed: ${(error as Error).message}; will retry`),
    );
  }

  onApplicationShutdown(): void {
    this.loop?.stop();
  }

  attachCursors(cursors: SessionCursors): void {
    this.cursors = cursors;
  }

  /** The session a command names, placed in the cache. Throws as `sessionOf`. */
  use(body: SessionFieldsBody): CommandSession | undefined {
    const session = sessionOf(body);
    if (session !== undefined) this.cache.vivify(session.lsid.id, session.txnNumber);
    return session;
  }

  /**
   * MongoDB's startSession: a new session id for the client, in the cache as `clusterIdOf` it
   * (the caller's own session, see `ownSessions`).
   */
  start(clusterIdOf: (id: string) => string = (id) => id): { id: { $uuid: string }; timeoutMinutes: number } {
    const id = randomUUID();
    this.cache.vivify(clusterIdOf(id));
    return { id: { $uuid: id }, timeoutMinutes: this.cache.timeoutMinutes };
  }

  /** refreshSessions: the sessions' last use is now. */
  refresh(ids: readonly string[]): void {
    for (const id of ids) this.cache.vivify(id);
  }

  /** endSessions: gone from the cache now, from the sessions table and with their cursors at the next refresh. */
  end(ids: readonly string[]): void {
    this.cache.end(ids);
  }

  /** killSessions: the sessions' cursors on this router are killed now; the sessions stay. */
  async kill(ids: readonly string[]): Promise<void> {
    await this.cursors?.killSessions(ids);
  }

  /** A retryable write's statements were answered from the session's history (`retriedStmtIds`). */
  noteRetried(statements: number): void {
    this.metrics.retriedStatements.inc(statements);
  }
}
