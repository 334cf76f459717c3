import { Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { type ClusterTimestamp, type Collation, TesseraError, type ValueObject, parseCollation } from '@tessera/core';
import type { CursorBatch, ShardClient } from '@tessera/protocol';
import { type Periodic, type TimeLimit, VectorClockService, runPeriodically, timeLimitField, timeLimitOf } from '@tessera/platform';
import { compileProjection, compileSort, distinctValues, projectionOptions, validateFilter } from '@tessera/query';
import { withStaleRetries } from '@tessera/routing';
import { fromWire, toWire } from '../api/extended-json.js';
import type { CountBody, DistinctBody, FindBody } from '../api/request-schemas.js';
import type { SessionFieldsBody } from '../api/session-fields.js';
import { RouterSessions } from '../sessions/router-sessions.service.js';
import { ClusterRoutingService } from '../routing/cluster-routing.service.js';
import { routeFilter } from '../writes/write-targeting.js';
import { IndexesService } from '../indexes/indexes.service.js';
import { timestampToWire } from '../clock/cluster-time-wire.js';
import { CursorRegistry } from './cursor-registry.js';
import { resolveReadConcern } from './read-concern.js';
import { planShardFind } from './find-plan.js';
import { type RouterTransaction, TransactionRouter } from '../transactions/transaction-router.service.js';
import { type TransactionBody, transactionStatementOf } from '../transactions/transaction-fields.js';
import type { CommandSession } from '../api/session-fields.js';
import type { ReadConcernBody } from './read-concern.js';
import type { TransactionFields } from '@tessera/protocol';
import { RouterCursor, type ShardBatch, type ShardCursorPort } from './router-cursor.js';

/** MongoDB's default first batch; we use it for later batches too. */
export const DEFAULT_BATCH_SIZE = 101;

export interface CursorResponse {
  /** `atClusterTime`: the time a snapshot read read at (MongoDB's cursor field). */
  cursor: {
    id: string;
    ns: string;
    firstBatch?: unknown[];
    nextBatch?: unknown[];
    atClusterTime?: { $timestamp: { t: number; i: number } };
  };
  ok: 1;
}

/**
 * The router's reads: target the shards a filter reaches, ask them in parallel, merge (sorted
 * when asked), apply skip and limit after the merge, and keep a router cursor for the rest.
 * Reads of a database or collection that does not exist answer empty.
 */
@Injectable()
export class QueryService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly cursors = new CursorRegistry();
  private reaper: Periodic | undefined;

  constructor(
    private readonly cluster: ClusterRoutingService,
    private readonly sessions: RouterSessions,
    private readonly clock: VectorClockService,
    private readonly transactions: TransactionRouter,
    private readonly indexes: IndexesService,
  ) {
    sessions.attachCursors({
      openCursors: (sessionId) => this.cursors.countOfSession(sessionId),
      killSessions: async (sessionIds) => void (await this.cursors.killSessions(sessionIds)),
    });
  }

  onApplicationBootstrap(): void {
    this.reaper = runPeriodically(
      async () => void (await this.cursors.reapIdle()),
      60_000,
      () => undefined,
    );
  }

  async onApplicationShutdown(): Promise<void> {
    this.reaper?.stop();
    await this.cursors.closeAll();
  }

  /** MongoDB's find; `owner`: the user opening its cursor, when the router checks callers. */
  async find(ns: string, body: FindBody, owner?: string): Promise<CursorResponse> {
    await this.indexes.checkHint(ns, body.hint);
    const session = this.sessions.use(body);
    const read = await this.readOf(body, session);
    if (read.transaction !== undefined) {
      const transaction = read.transaction;
      return this.transactions.run(transaction, () =>
        this.cluster.markingStale(ns, () => this.findWith(ns, body, session, read, transaction, owner)),
      );
    }
    return withStaleRetries(this.cluster.cache, ns, () => this.findWith(ns, body, session, read, undefined, owner));
  }

  /** A find at a read already resolved (`readOf`), outside or inside its transaction's `run`. */
  async findWith(
    ns: string,
    body: FindBody,
    session: CommandSession | undefined,
    { readConcern, atClusterTime, limit }: ResolvedRead,
    transaction: RouterTransaction | undefined,
    owner?: string,
  ): Promise<CursorResponse> {
    const filter = validateFilter(fromWire(body.filter), '');
    const collation = collationOf(body);
    const compare = body.sort === undefined ? undefined : compileSort(fromWire(body.sort), collation);
    const project =
      body.projection === undefined
        ? undefined
        : compileProjection(
            fromWire(body.projection),
            projectionOptions(filter, collation, body.let && (fromWire(body.let) as ValueObject)),
          );
    const firstBatchSize = body.batchSize ?? DEFAULT_BATCH_SIZE;
    const snapshot = atClusterTime === undefined ? {} : { atClusterTime: timestampToWire(atClusterTime) };
    const empty: CursorResponse = { cursor: { id: '0', ns, firstBatch: [], ...snapshot }, ok: 1 };
    {
      const routing = await this.cluster.routingForRead(ns);
      if (routing === undefined) return empty;
      const shards = routeFilter(targetingFilter(filter, collation), routing, atClusterTime);
      if (shards.length === 0) return empty;
      const plan = planShardFind({ ...body, filter: body.filter, batchSize: firstBatchSize }, shards.length);
      const command = readConcern === undefined ? plan.command : { ...plan.command, readConcern };
      const batches = await this.openShardCursors(shards, (client, shard) =>
        client.find({
          ...command,
          ...this.inTransaction(transaction, shard),
          ns,
          ...routing.versioningFor(shard),
          ...timeLimitField(limit),
          ...(body.collation !== undefined ? { collation: body.collation } : {}),
          ...(body.let !== undefined ? { let: body.let } : {}),
        }),
      );
      const cursor = new RouterCursor(
        ns,
        batches,
        {
          ...(plan.mergeSorted ? { compare: compare! } : {}),
          skip: plan.routerSkip,
          limit: body.limit ?? 0,
          ...(plan.projectOnRouter ? { project: project! } : {}),
        },
        this.cursorPort(),
      );
      const { id, documents } = await this.firstBatch(cursor, firstBatchSize, session, owner);
      return { cursor: { id, ns, firstBatch: documents, ...snapshot }, ok: 1 };
    }
  }

  /**
   * A read's concern and, for a transaction's statement, its transaction (started by it when it
   * says so, at its snapshot readConcern's time or this router's): a transaction reads every
   * shard at its snapshot, so its reads carry no readConcern of their own.
   */
  async readOf(
    body: TransactionBody & { readConcern?: ReadConcernBody | undefined; maxTimeMS?: number | undefined },
    session: CommandSession | undefined,
  ): Promise<ResolvedRead> {
    const of = transactionStatementOf(body, session);
    const resolved = resolveReadConcern(body.readConcern, this.clock.now().clusterTime);
    if (of === undefined) {
      if (session?.txnNumber !== undefined) {
        throw new TesseraError('INVALID_OPTIONS', 'a read takes a txnNumber only inside a transaction (with autocommit: false)', {
          details: { field: 'txnNumber' },
        });
      }
      return { readConcern: resolved.shards, atClusterTime: resolved.atClusterTime, limit: timeLimitOf(body.maxTimeMS) };
    }
    if (body.readConcern !== undefined && !of.start) {
      throw new TesseraError('INVALID_OPTIONS', 'only the first command of a transaction may carry a readConcern', {
        details: { field: 'readConcern' },
      });
    }
    const transaction = await this.transactions.statement(of, resolved.atClusterTime);
    return { readConcern: undefined, atClusterTime: transaction.atClusterTime, transaction, limit: timeLimitOf(body.maxTimeMS) };
  }

  inTransaction(transaction: RouterTransaction | undefined, shard: string): { transaction?: TransactionFields } {
    return transaction === undefined ? {} : { transaction: this.transactions.fieldsFor(transaction, shard, false) };
  }

  /** MongoDB's getMore by `caller` (the user, when the router checks callers). */
  async next(id: string, batchSize = DEFAULT_BATCH_SIZE, body: SessionFieldsBody = {}, caller?: string): Promise<CursorResponse> {
    this.sessions.use(body);
    const { cursor, documents, exhausted } = await this.cursors.next(id, batchSize, caller);
    return { cursor: { id: exhausted ? '0' : id, ns: cursor.ns, nextBatch: documents.map(toWire) }, ok: 1 };
  }

  /** MongoDB's killCursors by `caller` (the user, when the router checks callers). */
  async kill(id: string, caller?: string): Promise<{ cursorsKilled: string[]; ok: 1 }> {
    await this.cursors.kill(id, caller);
    return { cursorsKilled: [id], ok: 1 };
  }

  /** MongoDB's count: shards count in parallel; with several, skip and limit apply to the sum. */
  async count(ns: string, body: CountBody): Promise<{ n: number; ok: 1 }> {
    await this.indexes.checkHint(ns, body.hint);
    const read = await this.readOf(body, this.sessions.use(body));
    const { readConcern, atClusterTime, transaction, limit: timeLimit } = read;
    const filter = validateFilter(fromWire(body.filter), '');
    const collation = collationOf(body);
    return this.readRetrying(ns, transaction, async () => {
      const routing = await this.cluster.routingForRead(ns);
      const shards = routing === undefined ? [] : routeFilter(targetingFilter(filter, collation), routing, atClusterTime);
      if (routing === undefined || shards.length === 0) return { n: 0, ok: 1 as const };
      const skip = body.skip ?? 0;
      const limit = body.limit ?? 0;
      const single = shards.length === 1;
      const counts = await Promise.all(
        shards.map(async (shard) => {
          const client = await this.cluster.shard(shard);
          const window = single ? { skip, limit } : limit > 0 ? { limit: skip + limit } : {};
          return emptyIfMissing(
            client.count({
              ns,
              ...routing.versioningFor(shard),
              ...(readConcern && { readConcern }),
              ...this.inTransaction(transaction, shard),
              filter: body.filter,
              ...window,
              ...timeLimitField(timeLimit),
              ...(body.collation !== undefined ? { collation: body.collation } : {}),
            }),
            { n: 0 },
          );
        }),
      );
      const total = counts.reduce((sum, c) => sum + c.n, 0);
      if (single) return { n: total, ok: 1 as const };
      const n = Math.max(0, total - skip);
      return { n: limit > 0 ? Math.min(n, limit) : n, ok: 1 as const };
    });
  }

  /** MongoDB's distinct: the union of each shard's distinct values, without duplicates (in value order). */
  async distinct(ns: string, body: DistinctBody): Promise<{ values: unknown[]; ok: 1 }> {
    await this.indexes.checkHint(ns, body.hint);
    const { readConcern, atClusterTime, transaction, limit } = await this.readOf(body, this.sessions.use(body));
    const filter = validateFilter(fromWire(body.filter), '');
    const collation = collationOf(body);
    return this.readRetrying(ns, transaction, async () => {
      const routing = await this.cluster.routingForRead(ns);
      const shards = routing === undefined ? [] : routeFilter(targetingFilter(filter, collation), routing, atClusterTime);
      if (routing === undefined) return { values: [], ok: 1 as const };
      const answers = await Promise.all(
        shards.map(async (shard) => {
          const client = await this.cluster.shard(shard);
          const command = {
            ns,
            ...routing.versioningFor(shard),
            ...(readConcern && { readConcern }),
            ...this.inTransaction(transaction, shard),
            key: body.key,
            filter: body.filter,
            ...timeLimitField(limit),
            ...(body.collation !== undefined ? { collation: body.collation } : {}),
          };
          return emptyIfMissing(client.distinct(command), {
            values: [],
          });
        }),
      );
      return {
        values: distinctValues(
          answers.flatMap((a) => a.values.map(fromWire)),
          collation,
        ).map(toWire),
        ok: 1 as const,
      };
    });
  }

  /**
   * A read retried on stale routing, or a transaction's, which is not (its participants aborted)
   * and aborts the transaction on failure.
   */
  readRetrying<T>(ns: string, transaction: RouterTransaction | undefined, read: () => Promise<T>): Promise<T> {
    return transaction === undefined
      ? withStaleRetries(this.cluster.cache, ns, read)
      : this.transactions.run(transaction, () => this.cluster.markingStale(ns, read));
  }

  /**
   * Opens one cursor per shard in parallel with `open` (a find, an aggregate); if any fails, kills
   * the others and throws its error (a stale one is retried). A shard without the collection
   * answers empty.
   */
  async openShardCursors(shards: string[], open: (client: ShardClient, shard: string) => Promise<CursorBatch>) {
    const settled = await Promise.allSettled(
      shards.map(async (shard) => {
        const client = await this.cluster.shard(shard);
        const batch = await emptyIfMissing(open(client, shard), { cursorId: null, documents: [] });
        return { shard, batch: batchFromWire(batch) };
      }),
    );
    const failure = settled.find((s) => s.status === 'rejected');
    const opened = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    if (failure !== undefined) {
      const port = this.cursorPort();
      await Promise.allSettled(opened.filter((o) => o.batch.cursorId !== null).map((o) => port.kill(o.shard, [o.batch.cursorId!])));
      throw failure.reason;
    }
    return opened;
  }

  /** The first batch of a router cursor, registering the cursor for the session and its owner when more is left. */
  async firstBatch(
    cursor: RouterCursor,
    batchSize: number,
    session: CommandSession | undefined,
    owner: string | undefined,
  ): Promise<{ id: string; documents: unknown[] }> {
    const documents = await cursor.nextBatch(batchSize);
    return { id: cursor.isExhausted ? '0' : this.cursors.register(cursor, session?.lsid.id, owner), documents: documents.map(toWire) };
  }

  cursorPort(): ShardCursorPort {
    const client = (shard: string): Promise<ShardClient> => this.cluster.shard(shard);
    return {
      getMore: async (shard, cursorId, batchSize) => batchFromWire(await (await client(shard)).getMore({ cursorId, batchSize })),
      kill: async (shard, cursorIds) => void (await (await client(shard)).killCursors(cursorIds)),
    };
  }
}

/** A read's concern for the shards, its snapshot time to route by, and its transaction if it is one's statement. */
interface ResolvedRead {
  /** The read's maxTimeMS, which its shard commands carry as the time left. */
  limit?: TimeLimit | undefined;
  readConcern: ReturnType<typeof resolveReadConcern>['shards'];
  atClusterTime: ClusterTimestamp | undefined;
  transaction?: RouterTransaction;
}

function batchFromWire(batch: CursorBatch): ShardBatch {
  return { cursorId: batch.cursorId, documents: batch.documents.map((d) => fromWire(d) as ValueObject) };
}

/** A collection missing on a shard reads as empty. */
export async function emptyIfMissing<T>(answer: Promise<T>, empty: T): Promise<T> {
  try {
    return await answer;
  } catch (error) {
    if (error instanceof TesseraError && error.code === 'NAMESPACE_NOT_FOUND') return empty;
    throw error;
  }
}

/** A read's checked collation (`parseCollation`); undefined for byte order. */
export function collationOf(body: { collation?: Record<string, unknown> | undefined }): Collation | undefined {
  return body.collation === undefined ? undefined : parseCollation(fromWire(body.collation));
}

/**
 * The filter a read targets shards by: under a collation every shard, since a string the
 * collation calls equal to the filter's may sort anywhere in the shard key's byte order.
 */
export function targetingFilter(filter: ValueObject, collation: Collation | undefined): ValueObject {
  return collation === undefined ? filter : {};
}
