import { z } from 'zod';
import { type ClusterTimestamp, TesseraError, checkReadConcernTime } from '@tessera/core';
import type { ShardReadConcern } from '@tessera/protocol';

const timestampBodySchema = z
  .strictObject({ $timestamp: z.strictObject({ t: z.number().int().min(0).max(0xffffffff), i: z.number().int().min(0).max(0xffffffff) }) })
  .meta({
    description: 'A ClusterTime, `{ "$timestamp": { "t": <seconds>, "i": <increment> } }`, e.g. an `operationTime` this API answered.',
  });

/** The public `readConcern` of find, count and distinct, as MongoDB's. */
export const readConcernBodySchema = z
  .strictObject({
    level: z.enum(['local', 'majority', 'available', 'snapshot']).optional().meta({
      description: 'Each shard is one Postgres primary, so local, majority and available read the same. snapshot reads at one ClusterTime.',
    }),
    afterClusterTime: timestampBodySchema.optional().meta({
      description: 'Causal consistency: the read sees every write up to this time (pass the operationTime of your last write).',
    }),
    atClusterTime: timestampBodySchema.optional().meta({
      description: `With level snapshot: the data as it was at this time, within the shards' minSnapshotHistoryWindowInSeconds; the router's current time when omitted.`,
    }),
  })
  .meta({ description: 'MongoDB `readConcern`.' });
export type ReadConcernBody = z.output<typeof readConcernBodySchema>;

/** A read's concern as the router sends it to shards, and the snapshot time it routes with. */
export interface ResolvedReadConcern {
  shards?: ShardReadConcern;
  atClusterTime?: ClusterTimestamp;
}

/**
 * Resolves a public readConcern against this router's ClusterTime (`now`, already advanced by the
 * request's signed `$clusterTime`), as mongos: a snapshot read without `atClusterTime` reads at
 * `now`. Throws `INVALID_OPTIONS` for a time no node has handed out yet (past `now`), for
 * `atClusterTime` without level snapshot, and for both times at once. Pure.
 */
export function resolveReadConcern(body: ReadConcernBody | undefined, now: ClusterTimestamp): ResolvedReadConcern {
  if (body === undefined) return {};
  const after = body.afterClusterTime?.$timestamp;
  const at = body.atClusterTime?.$timestamp;
  if (at !== undefined && body.level !== 'snapshot') {
    throw new TesseraError('INVALID_OPTIONS', 'readConcern atClusterTime is only valid with level snapshot', {
      details: { field: 'readConcern' },
    });
  }
  if (at !== undefined && after !== undefined) {
    throw new TesseraError('INVALID_OPTIONS', 'readConcern cannot specify both afterClusterTime and atClusterTime', {
      details: { field: 'readConcern' },
    });
  }
  if (after !== undefined) checkReadConcernTime('afterClusterTime', after, now);
  if (at !== undefined) checkReadConcernTime('atClusterTime', at, now);
  if (body.level === 'snapshot') {
    const atClusterTime = at ?? now;
    return { shards: { atClusterTime }, atClusterTime };
  }
  return after === undefined ? {} : { shards: { afterClusterTime: after } };
}
