import { z } from 'zod';
import type { RefreshSessionsRequest, RefreshSessionsResult } from '@tessera/protocol';

/** The settings of a node's logical session cache, with MongoDB's parameter names. */
export const logicalSessionSettingsShape = {
  /** How often the cache syncs with the config server's sessions table (`logicalSessionRefreshMillis`). */
  TESSERA_LOGICAL_SESSION_REFRESH_MILLIS: z.coerce.number().int().min(1).max(86_400_000).default(300_000),
  /** Turns the periodic refresh (and a shard's reaping) off (`disableLogicalSessionCacheRefresh`); for tests. */
  TESSERA_DISABLE_LOGICAL_SESSION_CACHE_REFRESH: z.stringbool().default(false),
};

/** What the cache needs from its node. */
export interface LogicalSessionCachePort {
  readonly node: string;
  readonly role: 'router' | 'shard';
  /** Sends a refresh to the config server. */
  refresh(request: RefreshSessionsRequest): Promise<RefreshSessionsResult>;
  /** Cursors of the session open on this node. */
  openCursors(id: string): number;
  /** Kills the node's cursors of these sessions (ended here, or expired). */
  killCursors(ids: readonly string[]): Promise<void>;
  now(): number;
}

interface Entry {
  lastUse: number;
  txnNumber: number | undefined;
  usedSinceRefresh: boolean;
}

/** MongoDB's default `localLogicalSessionTimeoutMinutes`, until the config server says otherwise. */
const DEFAULT_TIMEOUT_MINUTES = 30;

/**
 * A node's logical session cache (sharding-internals.md, "The logical session cache"): the
 * sessions its commands named, with their last use. `refresh` is the reference's four steps:
 * upsert the sessions used since the last refresh into the config server's sessions table,
 * remove those ended here, drop the cached ones the table no longer holds (expired), and kill
 * the cursors of the ended and expired ones. A refresh that fails keeps everything for the next.
 */
export class LogicalSessionCache {
  private readonly sessions = new Map<string, Entry>();
  private ended = new Set<string>();
  private reaped = new Set<string>();
  private retriesAnswered = new Map<string, number>();
  private timeout = DEFAULT_TIMEOUT_MINUTES;

  constructor(private readonly port: LogicalSessionCachePort) {}

  /** `localLogicalSessionTimeoutMinutes`, as the last refresh learned it. */
  get timeoutMinutes(): number {
    return this.timeout;
  }

  get size(): number {
    return this.sessions.size;
  }

  has(id: string): boolean {
    return this.sessions.has(id);
  }

  /** Places a session named by a command in the cache, or notes its use (and its txnNumber). */
  vivify(id: string, txnNumber?: number): void {
    const entry = this.sessions.get(id);
    const now = this.port.now();
    this.ended.delete(id);
    if (entry === undefined) {
      this.sessions.set(id, { lastUse: now, txnNumber, usedSinceRefresh: true });
      return;
    }
    entry.lastUse = now;
    entry.usedSinceRefresh = true;
    if (txnNumber !== undefined && (entry.txnNumber === undefined || txnNumber > entry.txnNumber)) entry.txnNumber = txnNumber;
  }

  /** `endSessions`: the sessions leave the cache now; the next refresh removes them from the table and kills their cursors. */
  end(ids: readonly string[]): void {
    for (const id of ids) {
      this.sessions.delete(id);
      this.ended.add(id);
    }
  }

  /** A shard reaped these sessions' retryable-write records; the next refresh reports it. */
  noteReaped(ids: readonly string[]): void {
    for (const id of ids) this.reaped.add(id);
  }

  /** A retryable write of the session was answered from its history; the next refresh reports it. */
  noteRetryAnswered(id: string): void {
    this.retriesAnswered.set(id, (this.retriesAnswered.get(id) ?? 0) + 1);
  }

  /** The four refresh steps; answers the sessions that left the cache (ended or expired). */
  async refresh(): Promise<string[]> {
    const used = new Map([...this.sessions].filter(([, e]) => e.usedSinceRefresh).map(([id, e]) => [id, e.lastUse]));
    const { ended, reaped, retriesAnswered } = this;
    this.ended = new Set();
    this.reaped = new Set();
    this.retriesAnswered = new Map();
    let result: RefreshSessionsResult;
    try {
      result = await this.port.refresh(this.refreshRequest(used, ended, reaped, retriesAnswered));
    } catch (error) {
      this.restore(ended, reaped, retriesAnswered);
      throw error;
    }
    this.timeout = result.timeoutMinutes;
    // A use during the refresh is sent by the next one.
    for (const [id, lastUse] of used) {
      const entry = this.sessions.get(id);
      if (entry?.lastUse === lastUse) entry.usedSinceRefresh = false;
    }
    const expired = result.expired.filter((id) => this.sessions.get(id)?.usedSinceRefresh === false);
    for (const id of expired) this.sessions.delete(id);
    const gone = [...new Set([...ended, ...expired])];
    if (gone.length > 0) await this.port.killCursors(gone);
    return gone;
  }

  /** Step 1's used sessions, step 2's ended ones, and the cached ids step 3 asks about. */
  private refreshRequest(
    used: ReadonlyMap<string, number>,
    ended: ReadonlySet<string>,
    reaped: ReadonlySet<string>,
    retriesAnswered: ReadonlyMap<string, number>,
  ): RefreshSessionsRequest {
    return {
      node: this.port.node,
      role: this.port.role,
      used: [...used].map(([id, lastUse]) => {
        const txnNumber = this.sessions.get(id)?.txnNumber;
        return {
          id,
          lastUse: new Date(lastUse).toISOString(),
          openCursors: this.port.openCursors(id),
          ...(txnNumber === undefined ? {} : { txnNumber }),
        };
      }),
      ended: [...ended],
      cached: [...this.sessions.keys()],
      reaped: [...reaped],
      retriesAnswered: [...retriesAnswered].map(([id, count]) => ({ id, count })),
    };
  }

  /** Puts back what a failed refresh took, for the next one. */
  private restore(ended: Set<string>, reaped: Set<string>, retriesAnswered: Map<string, number>): void {
    for (const id of ended) if (!this.sessions.has(id)) this.ended.add(id);
    for (const id of reaped) this.reaped.add(id);
    for (const [id, count] of retriesAnswered) this.retriesAnswered.set(id, (this.retriesAnswered.get(id) ?? 0) + count);
  }
}
