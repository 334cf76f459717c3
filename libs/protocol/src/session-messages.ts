import { z } from 'zod';

/**
 * The logical session cache's refresh (sharding-internals.md, "How the logical session cache
 * syncs with the sessions collection"): every `logicalSessionRefreshMillis` each router and shard
 * sends the config server the sessions used since its last refresh (upserted with their last
 * use), those ended on it (`endSessions`, removed), and every session it still caches; the answer
 * names the cached ones the sessions table no longer holds (expired or ended elsewhere), which the
 * node drops from its cache, killing their cursors.
 */
const sessionId = z.uuid();

export const usedSessionSchema = z.strictObject({
  id: sessionId,
  /** When this node last saw the session, ISO 8601. */
  lastUse: z.iso.datetime(),
  /** Cursors of the session open on this node. */
  openCursors: z.number().int().min(0).default(0),
  /** The highest txnNumber this node has seen on the session, when any. */
  txnNumber: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
});
export type UsedSession = z.input<typeof usedSessionSchema>;

export const refreshSessionsRequestSchema = z.strictObject({
  /** The node's name (`router0`, `shard1`), as the control plane shows which nodes know a session. */
  node: z.string().min(1).max(128),
  role: z.enum(['router', 'shard']),
  used: z.array(usedSessionSchema).max(1_000_000),
  ended: z.array(sessionId).max(1_000_000),
  cached: z.array(sessionId).max(1_000_000),
  /** Sessions whose retryable-write records this shard reaped since its last refresh. */
  reaped: z.array(sessionId).max(1_000_000).default([]),
  /** Retryable writes this node answered from a session's history since its last refresh, by session. */
  retriesAnswered: z
    .array(z.strictObject({ id: sessionId, count: z.number().int().min(1) }))
    .max(1_000_000)
    .default([]),
});
export type RefreshSessionsRequest = z.input<typeof refreshSessionsRequestSchema>;

export interface RefreshSessionsResult {
  /** Of the node's cached sessions, those the sessions table no longer holds. */
  expired: string[];
  /** `localLogicalSessionTimeoutMinutes`, the config server's: how long an unused session lives. */
  timeoutMinutes: number;
}

/** Which of `ids` the sessions table still holds (a shard's reaper keeps their records). */
export const liveSessionsRequestSchema = z.strictObject({ ids: z.array(sessionId).max(1_000_000) });
export type LiveSessionsRequest = z.input<typeof liveSessionsRequestSchema>;
