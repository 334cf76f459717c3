import { Injectable } from '@nestjs/common';
import { TesseraError, type ValueObject } from '@tessera/core';
import { withStaleRetries } from '@tessera/routing';
import { fromWire, toWire } from '../api/extended-json.js';
import { QueryService } from '../reads/query.service.js';
import { ClusterRoutingService } from '../routing/cluster-routing.service.js';
import type { RouterTransaction } from '../transactions/transaction-router.service.js';
import { targetDocumentFilter, targetDocumentProjection } from './write-targeting.js';

/** Phase 2 and 3 rounds before a statement whose documents keep changing gives up. */
export const MAX_TARGET_ATTEMPTS = 10;

/** What phase 2 reads by: the statement's filter, and its sort, collation and `let` as the client sent them. */
export interface TargetQuery {
  readonly filter: ValueObject;
  readonly sort?: ValueObject | undefined;
  readonly collation?: Record<string, unknown> | undefined;
  readonly let?: Record<string, unknown> | undefined;
}

/** A statement's phases, as the write path sends them (one statement per command, index 0). */
export interface WithoutShardKeyPhases<R> {
  /** Phase 1, for a retryable write: the answer of a shard that already ran the statement, if one did. */
  readonly probe?: (() => Promise<R | undefined>) | undefined;
  /** Phase 3: the statement with `filter`, which names one document by `_id` and full shard key. */
  readonly write: (filter: ValueObject) => Promise<R>;
  /** True when a phase 3 answer is final: it changed the document or failed. */
  readonly settled: (reply: R) => boolean;
  /** The answer when no document matches. */
  readonly none: () => R;
}

/**
 * MongoDB 7.0's write without shard key: a single-document update, delete, replacement or
 * findAndModify on a sharded collection whose filter does not hold the full shard key by
 * equality (`isWriteWithoutShardKey`). One method per phase:
 *
 * 1. `probe` (a retryable write): every shard owning a chunk of the collection is asked whether
 *    the statement already ran there; one that did answers from its history, and that answer is
 *    the statement's. A statement's record moves with its document's chunk, and phase 3 records
 *    only a statement that changed a document, so the shard holding the record owns a chunk.
 * 2. `readTarget`: one matching document's `_id` and shard key are read, with a find of limit 1
 *    (the first by the findAndModify's sort), at the statement's read: the transaction's
 *    snapshot in a transaction.
 * 3. `write`: the statement runs on that document's owner, its filter narrowed by
 *    `targetDocumentFilter`. A document changed or deleted since phase 2 no longer matches; the
 *    shard then records nothing and the router goes back to phase 2 (at most
 *    `MAX_TARGET_ATTEMPTS` rounds, then WriteConflict). No document found in phase 2: the
 *    statement matched nothing.
 *
 * Against a migration: phase 3 targets the full shard key with the shard's version check, so a
 * document that moved since phase 2 is written on its new owner (a stale retry), never on the
 * donor's orphan; phase 2 reads with orphan filtering, so no document is picked twice.
 *
 * Not closed: a retry sent while its first attempt is still running on another router may
 * probe before that attempt writes, and change a second document. MongoDB runs phases 2 and 3 in
 * an internal transaction of the session, which serializes the two.
 */
@Injectable()
export class WriteWithoutShardKeyService {
  constructor(
    private readonly cluster: ClusterRoutingService,
    private readonly queries: QueryService,
  ) {}

  async run<R>(
    ns: string,
    statement: TargetQuery,
    transaction: RouterTransaction | undefined,
    phases: WithoutShardKeyPhases<R>,
  ): Promise<R> {
    const retried = await phases.probe?.();
    if (retried !== undefined) return retried;
    for (let attempt = 1; attempt <= MAX_TARGET_ATTEMPTS; attempt++) {
      const target = await this.readTarget(ns, statement, transaction);
      if (target === undefined) return phases.none();
      const reply = await phases.write(target);
      if (phases.settled(reply)) return reply;
    }
    throw new TesseraError(
      'WRITE_CONFLICT',
      `a single-document write without shard key on ${ns} found ${MAX_TARGET_ATTEMPTS} documents in a row changed before it could write them; retry it`,
      { details: { namespace: ns } },
    );
  }

  /** Phase 2: the write phase's filter for one matching document, or undefined when none matches. */
  private async readTarget(
    ns: string,
    { filter, sort, collation, let: letSpec }: TargetQuery,
    transaction: RouterTransaction | undefined,
  ): Promise<ValueObject | undefined> {
    const read = async () => {
      const routing = await this.cluster.routingForRead(ns);
      if (routing === undefined) return undefined;
      const pattern = routing.kind === 'sharded' ? routing.pattern : { fields: [] };
      const resolved =
        transaction === undefined
          ? await this.queries.readOf({}, undefined)
          : { readConcern: undefined, atClusterTime: transaction.atClusterTime, transaction };
      const found = await this.queries.findWith(
        ns,
        {
          filter: toWire(filter) as Record<string, unknown>,
          ...(sort !== undefined ? { sort: toWire(sort) as Record<string, unknown> } : {}),
          ...(collation !== undefined ? { collation } : {}),
          ...(letSpec !== undefined ? { let: letSpec } : {}),
          projection: targetDocumentProjection(pattern),
          limit: 1,
          batchSize: 1,
        },
        undefined,
        resolved,
        transaction,
      );
      const document = found.cursor.firstBatch?.[0];
      return document === undefined ? undefined : targetDocumentFilter(pattern, fromWire(document) as ValueObject, filter);
    };
    return transaction === undefined ? withStaleRetries(this.cluster.cache, ns, read) : this.cluster.markingStale(ns, read);
  }
}

/** A probe's answer when a shard had run the statement (or could not tell: its error), else undefined. */
export function answeredByProbe<R extends { writeErrors: unknown[]; retriedStmtIds?: number[] }>(reply: R): R | undefined {
  return reply.retriedStmtIds !== undefined || reply.writeErrors.length > 0 ? reply : undefined;
}
