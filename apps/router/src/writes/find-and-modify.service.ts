import { Injectable } from '@nestjs/common';
import type { ValueObject } from '@tessera/core';
import type { FindAndModifyResult, WithoutShardKeyPhase } from '@tessera/protocol';
import { Failpoints } from '@tessera/platform';
import { withStaleRetries } from '@tessera/routing';
import { documentFromWire, fromWire, toWire } from '../api/extended-json.js';
import type { FindAndModifyBody } from '../api/request-schemas.js';
import type { CommandSession } from '../api/session-fields.js';
import { ClusterRoutingService, type CollectionRouting } from '../routing/cluster-routing.service.js';
import { RouterSessions } from '../sessions/router-sessions.service.js';
import { type RouterTransaction, TransactionRouter } from '../transactions/transaction-router.service.js';
import { isRetryableWrite, runAsStatement, sessionFields } from './write-sessions.js';
import {
  type WriteShape,
  checkUnmovedSince,
  isWriteWithoutShardKey,
  routeFilter,
  routeWrite,
  writeTargetingFilter,
} from './write-targeting.js';
import { collationOf } from '../reads/query.service.js';
import { WriteWithoutShardKeyService } from './write-without-shard-key.service.js';
import { IndexesService } from '../indexes/indexes.service.js';
import { checkUpdateShape } from './write-statements.js';

/**
 * MongoDB's findAndModify: on the one shard the full shard key names, or as a write without
 * shard key (`WriteWithoutShardKeyService`), whose phase 2 reads the first match by `sort`
 * across the shards.
 */
@Injectable()
export class FindAndModifyService {
  constructor(
    private readonly cluster: ClusterRoutingService,
    private readonly sessions: RouterSessions,
    private readonly failpoints: Failpoints,
    private readonly transactions: TransactionRouter,
    private readonly withoutShardKey: WriteWithoutShardKeyService,
    private readonly indexes: IndexesService,
  ) {}

  /** `{ lastErrorObject, value, ok: 1 }`. */
  async findAndModify(ns: string, body: FindAndModifyBody): Promise<FindAndModifyResult & { ok: 1 }> {
    await this.indexes.checkHint(ns, body.hint);
    const session = this.sessions.use(body);
    return runAsStatement(this.transactions, body, session, (transaction) => this.findAndModifyWith(ns, body, session, transaction));
  }

  private async findAndModifyWith(
    ns: string,
    body: FindAndModifyBody,
    session: CommandSession | undefined,
    transaction: RouterTransaction | undefined,
  ): Promise<FindAndModifyResult & { ok: 1 }> {
    const query = documentFromWire(body.query);
    const update = body.update === undefined ? undefined : fromWire(body.update);
    if (update !== undefined) checkUpdateShape({ q: query, u: update, multi: false, upsert: body.upsert });
    const shape: WriteShape = {
      filter: query,
      single: true,
      upsert: body.upsert,
      operation: 'findAndModify',
      collation: collationOf(body),
    };
    const none = (): FindAndModifyResult & { ok: 1 } => ({ value: null, lastErrorObject: { n: 0, updatedExisting: false }, ok: 1 });
    const withRetries = <T>(attempt: () => Promise<T>) =>
      // A transaction's statement is not retried on stale routing: its participant aborted.
      transaction === undefined ? withStaleRetries(this.cluster.cache, ns, attempt) : this.cluster.markingStale(ns, attempt);
    const sendTo = async (shard: string, routing: CollectionRouting, q: ValueObject, phase: WithoutShardKeyPhase | undefined) => {
      const client = await this.cluster.shard(shard);
      const result = await client.findAndModify({
        ns,
        ...routing.versioningFor(shard),
        ...sessionFields(this.transactions, session, transaction, { indexes: [0], shard }),
        ...(phase !== undefined ? { withoutShardKey: phase } : {}),
        query: toWire(q) as Record<string, unknown>,
        remove: body.remove,
        new: body.new,
        upsert: body.upsert,
        ...(body.sort ? { sort: body.sort } : {}),
        ...(body.fields ? { fields: body.fields } : {}),
        ...(update !== undefined ? { update: toWire(update) as Record<string, unknown> } : {}),
        ...(body.arrayFilters !== undefined ? { arrayFilters: body.arrayFilters } : {}),
        ...(body.collation !== undefined ? { collation: body.collation } : {}),
        ...(body.let !== undefined ? { let: body.let } : {}),
      });
      if (result.retriedStmtIds !== undefined) this.sessions.noteRetried(result.retriedStmtIds.length);
      await this.failpoints.pauseAt('router.write.beforeReply', ns);
      return { ...result, ok: 1 as const };
    };
    const send = async (q: ValueObject, phase?: WithoutShardKeyPhase) => {
      const routing = await this.cluster.routingForWrite(ns);
      if (phase === 'probe') {
        // Every owner is asked; at most one ran the statement.
        const replies = await Promise.all(routeFilter({}, routing).map((shard) => sendTo(shard, routing, q, phase)));
        return replies.find((reply) => reply.retriedStmtIds !== undefined) ?? none();
      }
      // The write phase names its document by its exact shard key, whatever the collation.
      const qShape = { ...shape, filter: q, ...(phase === 'write' ? { collation: undefined } : {}) };
      if (transaction !== undefined)
        checkUnmovedSince(routing, { filter: writeTargetingFilter(qShape, routing) }, transaction.atClusterTime);
      const [shard] = routeWrite(qShape, routing);
      return shard === undefined ? none() : sendTo(shard, routing, q, phase);
    };
    if (!isWriteWithoutShardKey(shape, await this.cluster.routingForWrite(ns))) return withRetries(() => send(query));
    const target = { filter: query, sort: body.sort && documentFromWire(body.sort), collation: body.collation, let: body.let };
    return this.withoutShardKey.run(ns, target, transaction, {
      probe: isRetryableWrite(session, transaction)
        ? async () => {
            const reply = await withRetries(() => send(query, 'probe'));
            return reply.retriedStmtIds === undefined ? undefined : reply;
          }
        : undefined,
      write: (q) => withRetries(() => send(q, 'write')),
      settled: (reply) => reply.lastErrorObject.n > 0,
      none,
    });
  }
}
