import { Injectable } from '@nestjs/common';
import { ObjectId } from 'bson';
import { TesseraError, type ValueObject, valueAtPath } from '@tessera/core';
import type { DeleteCommandResult, InsertCommandResult, UpdateCommandResult, WithoutShardKeyPhase } from '@tessera/protocol';
import { checkInsertFields } from '@tessera/query';
import { Failpoints } from '@tessera/platform';
import { type PublicWriteError, documentFromWire, fromWire, publicWriteError, toWire } from '../api/extended-json.js';
import type { DeleteBody, InsertBody } from '../api/request-schemas.js';
import type { CommandSession } from '../api/session-fields.js';
import { RouterSessions } from '../sessions/router-sessions.service.js';
import { ClusterRoutingService, type CollectionRouting } from '../routing/cluster-routing.service.js';
import { type ShardWriteReply, type StatementRouting, type WriteExecution, envelopeOf, executeWriteBatch } from './write-execution.js';
import type { ChildBatch, RoutedStatement, RouterWriteError } from './write-plan.js';
import {
  checkUnmovedSince,
  isWriteWithoutShardKey,
  routeFilter,
  routeInsert,
  routeWrite,
  writeTargetingFilter,
} from './write-targeting.js';
import {
  type DeleteResponse,
  type InsertResponse,
  type UpdateResponse,
  eachStatement,
  noneDeleted,
  noneUpdated,
} from './write-responses.js';
import { WriteWithoutShardKeyService, answeredByProbe } from './write-without-shard-key.service.js';
import { IndexesService, badHint } from '../indexes/indexes.service.js';
import { isRetryableWrite, notRetryable, numbered, runAsStatement, sessionFields, sessionPartOf, statementOf } from './write-sessions.js';
import { type RouterTransaction, TransactionRouter } from '../transactions/transaction-router.service.js';
import { InsertCoalescer } from './insert-coalescer.js';
import {
  type DeleteStatement,
  type InternalUpdateBody,
  type UpdateStatement,
  checkUpdateShape,
  deleteShape,
  updateShape,
} from './write-statements.js';

/**
 * The router's writes: validate at the edge, split per shard (`executeWriteBatch`), send in
 * parallel or in order, retry what met stale routing, and map the shards' answers back to the
 * user's statement indexes. A write to a database that does not exist creates it first.
 */
@Injectable()
export class WriteService {
  private readonly inserts: InsertCoalescer;

  constructor(
    private readonly cluster: ClusterRoutingService,
    private readonly sessions: RouterSessions,
    private readonly failpoints: Failpoints,
    private readonly transactions: TransactionRouter,
    private readonly withoutShardKey: WriteWithoutShardKeyService,
    private readonly indexes: IndexesService,
  ) {
    this.inserts = new InsertCoalescer((shard, command) => this.cluster.shard(shard).then((client) => client.insert(command)));
  }

  /**
   * insertMany. Documents go to their shards as they came (Extended JSON): the router decodes no
   * more than it checks and routes by, the `_id` (generated as an ObjectId, first, when missing)
   * and the shard key's fields, and the shard validates and stores the whole document. The
   * statement checks that name the user's index (top-level `$` names, the `_id`'s type) are made
   * here, so a bad document is refused without sending anything; a document over 16 MiB is the
   * shard's to refuse. `bodyBytes` (the request's length) sizes the coalesced commands.
   */
  async insert(ns: string, body: InsertBody, bodyBytes?: number, stmtIdBase = 0): Promise<InsertResponse> {
    const session = numbered(this.sessions.use(body), stmtIdBase);
    return runAsStatement(this.transactions, body, session, (transaction) => this.insertWith(ns, body, session, transaction, bodyBytes));
  }

  private async insertWith(
    ns: string,
    body: InsertBody,
    session: CommandSession | undefined,
    transaction: RouterTransaction | undefined,
    bodyBytes?: number,
  ): Promise<InsertResponse> {
    const prepared = body.documents.map((json, index): WireInsert | TesseraError => {
      try {
        return wireInsert(json, index);
      } catch (error) {
        if (error instanceof TesseraError) return error;
        throw error;
      }
    });
    const bytesPerDocument = (bodyBytes ?? JSON.stringify(body.documents).length) / Math.max(1, body.documents.length);
    const execution = await this.execute<InsertCommandResult>(
      ns,
      prepared.length,
      body.ordered,
      (index, routing) => {
        const insert = prepared[index]!;
        if (insert instanceof TesseraError) throw insert;
        if (transaction !== undefined) checkUnmovedSince(routing, { document: insert.document }, transaction.atClusterTime);
        return [routeInsert(insert.document, routing)];
      },
      (batch, routing) => {
        const documents = batch.indexes.map((i) => (prepared[i] as WireInsert).document);
        if (transaction !== undefined) {
          return this.cluster.shard(batch.shard).then((client) =>
            client.insert({
              ns,
              ...routing.versioningFor(batch.shard),
              transaction: this.transactions.fieldsFor(transaction, batch.shard, true),
              documents: [...documents],
              ordered: body.ordered,
            }),
          );
        }
        return this.inserts.insert(
          batch.shard,
          ns,
          routing.versioningFor(batch.shard),
          documents,
          body.ordered,
          Math.ceil(bytesPerDocument * batch.indexes.length),
          sessionPartOf(session, batch),
        );
      },
      transaction,
    );
    const insertedIds: Record<string, unknown> = {};
    for (const { batch, reply } of execution.replies) {
      for (const index of reply.inserted) {
        const user = batch.indexes[index]!;
        insertedIds[String(user)] = (prepared[user] as WireInsert).id;
      }
    }
    return {
      insertedCount: Object.keys(insertedIds).length,
      insertedIds,
      writeErrors: publicErrors(execution),
      ...this.retried(execution),
      ok: 1,
    };
  }

  async update(ns: string, body: InternalUpdateBody, stmtIdBase = 0): Promise<UpdateResponse> {
    const session = numbered(this.sessions.use(body), stmtIdBase);
    return runAsStatement(this.transactions, body, session, (transaction) => this.updateWith(ns, body, session, transaction));
  }

  private async updateWith(
    ns: string,
    body: InternalUpdateBody,
    session: CommandSession | undefined,
    transaction: RouterTransaction | undefined,
  ): Promise<UpdateResponse> {
    if (transaction === undefined && session?.txnNumber !== undefined && body.updates.some((s) => s.multi))
      throw notRetryable('an update with multi: true');
    const refusals = await this.hintRefusals(ns, body.updates);
    const statements: UpdateStatement[] = body.updates.map((s, i) => ({
      q: documentFromWire(s.q),
      u: fromWire(s.u),
      multi: s.multi,
      upsert: s.upsert,
      ...(s.arrayFilters !== undefined ? { arrayFilters: s.arrayFilters } : {}),
      ...(s.collation !== undefined ? { collation: s.collation } : {}),
      ...(s.c !== undefined ? { c: s.c } : {}),
      ...(s.upsertSupplied === true ? { upsertSupplied: true } : {}),
      ...refusals[i],
    }));
    const routing = await this.cluster.routingForWrite(ns);
    const withoutShardKey = statements.some((s) => s.refusal === undefined && isWriteWithoutShardKey(updateShape(s), routing));
    if (withoutShardKey && statements.length > 1) {
      return eachStatement(
        statements.length,
        body.ordered,
        (i) => this.updateWith(ns, { ...body, updates: [body.updates[i]!] }, statementOf(session, i), transaction),
        noneUpdated,
      );
    }
    try {
      if (withoutShardKey) {
        const statement = statements[0]!;
        const send = async (phase: WithoutShardKeyPhase, q: ValueObject) =>
          this.updateResponse(await this.executeUpdate(ns, body, [{ ...statement, q }], session, transaction, phase));
        return await this.runWithoutShardKey(ns, { ...statement, let: body.let }, session, transaction, send, noneUpdated);
      }
      return this.updateResponse(await this.executeUpdate(ns, body, statements, session, transaction));
    } catch (error) {
      if (
        transaction !== undefined &&
        statements.length === 1 &&
        error instanceof TesseraError &&
        error.code === 'WOULD_CHANGE_OWNING_SHARD'
      )
        return this.moveToNewOwner(ns, error, session, transaction);
      throw error;
    }
  }

  /** A single-document update or delete without the shard key, by `WriteWithoutShardKeyService`'s phases. */
  private runWithoutShardKey<R extends UpdateResponse | DeleteResponse>(
    ns: string,
    statement: { q: ValueObject; collation?: Record<string, unknown> | undefined; let?: Record<string, unknown> | undefined },
    session: CommandSession | undefined,
    transaction: RouterTransaction | undefined,
    send: (phase: WithoutShardKeyPhase, q: ValueObject) => Promise<R>,
    none: () => R,
  ): Promise<R> {
    const { q: filter, collation, let: letSpec } = statement;
    return this.withoutShardKey.run(ns, { filter, collation, let: letSpec }, transaction, {
      probe: isRetryableWrite(session, transaction) ? async () => answeredByProbe(await send('probe', filter)) : undefined,
      write: (q) => send('write', q),
      settled: (reply) => ('deletedCount' in reply ? reply.deletedCount : reply.matchedCount) > 0 || reply.writeErrors.length > 0,
      none,
    });
  }

  private updateResponse(execution: WriteExecution<UpdateCommandResult>): UpdateResponse {
    let matchedCount = 0;
    let modifiedCount = 0;
    const upsertedIds: Record<string, unknown> = {};
    for (const { batch, reply } of execution.replies) {
      matchedCount += reply.matchedCount;
      modifiedCount += reply.modifiedCount;
      for (const { index, _id } of reply.upserted) upsertedIds[String(batch.indexes[index])] = _id;
    }
    const upsertedCount = Object.keys(upsertedIds).length;
    return {
      matchedCount,
      modifiedCount,
      upsertedCount,
      upsertedIds,
      writeErrors: publicErrors(execution),
      ...this.retried(execution),
      ok: 1,
    };
  }

  private executeUpdate(
    ns: string,
    body: InternalUpdateBody,
    statements: readonly UpdateStatement[],
    session: CommandSession | undefined,
    transaction: RouterTransaction | undefined,
    phase?: WithoutShardKeyPhase,
  ): Promise<WriteExecution<UpdateCommandResult>> {
    return this.execute<UpdateCommandResult>(
      ns,
      statements.length,
      body.ordered,
      (index, routing) => {
        const statement = statements[index]!;
        if (statement.refusal !== undefined) throw statement.refusal;
        checkUpdateShape(statement);
        if (phase === 'probe') return routeFilter({}, routing);
        // The write phase names its document by its exact shard key, whatever the collation.
        const shape = phase === 'write' ? { ...updateShape(statement), collation: undefined } : updateShape(statement);
        if (transaction !== undefined)
          checkUnmovedSince(routing, { filter: writeTargetingFilter(shape, routing) }, transaction.atClusterTime);
        return routeWrite(shape, routing);
      },
      (batch, routing) =>
        this.cluster.shard(batch.shard).then((client) =>
          client.update({
            ns,
            ...routing.versioningFor(batch.shard),
            ...sessionFields(this.transactions, session, transaction, batch),
            ...(phase !== undefined ? { withoutShardKey: phase } : {}),
            ordered: body.ordered,
            ...(body.let !== undefined ? { let: body.let } : {}),
            updates: batch.indexes.map((i) => {
              const s = statements[i]!;
              return {
                q: toWire(s.q) as Record<string, unknown>,
                u: toWire(s.u) as Record<string, unknown>,
                multi: s.multi,
                upsert: s.upsert,
                ...(s.arrayFilters !== undefined ? { arrayFilters: s.arrayFilters } : {}),
                ...(s.collation !== undefined ? { collation: s.collation } : {}),
                ...(s.c !== undefined ? { c: s.c } : {}),
                ...(s.upsertSupplied === true ? { upsertSupplied: true } : {}),
              };
            }),
          }),
        ),
      transaction,
    );
  }

  /**
   * A single-document update in a transaction that gives the document a shard key value another
   * shard owns, answered `WouldChangeOwningShard` with both images: as MongoDB's router does, the
   * document is deleted where it is and its new image inserted on its new owner, both in the
   * transaction (the new owner joins it).
   */
  private async moveToNewOwner(
    ns: string,
    error: TesseraError,
    session: CommandSession | undefined,
    transaction: RouterTransaction,
  ): Promise<UpdateResponse> {
    const { preImage, postImage } = error.details as { preImage: Record<string, unknown>; postImage: Record<string, unknown> };
    const routing = await this.cluster.routingForWrite(ns);
    const where: Record<string, unknown> = { _id: preImage['_id'] };
    if (routing.kind === 'sharded') {
      const pre = documentFromWire(preImage);
      for (const { path } of routing.pattern.fields) where[path] = toWire(valueAtPath(pre, path) ?? null);
    }
    const removed = await this.deleteWith(ns, { deletes: [{ q: where, limit: 1 }], ordered: true } as DeleteBody, session, transaction);
    if (removed.deletedCount !== 1) {
      throw new TesseraError('WRITE_CONFLICT', 'the document whose shard key the update changes was gone when it was to move');
    }
    await this.insertWith(ns, { documents: [postImage], ordered: true } as InsertBody, session, transaction);
    return { matchedCount: 1, modifiedCount: 1, upsertedCount: 0, upsertedIds: {}, writeErrors: [], ok: 1 };
  }

  async delete(ns: string, body: DeleteBody, stmtIdBase = 0): Promise<DeleteResponse> {
    const session = numbered(this.sessions.use(body), stmtIdBase);
    return runAsStatement(this.transactions, body, session, (transaction) => this.deleteWith(ns, body, session, transaction));
  }

  private async deleteWith(
    ns: string,
    body: DeleteBody,
    session: CommandSession | undefined,
    transaction: RouterTransaction | undefined,
  ): Promise<DeleteResponse> {
    if (transaction === undefined && session?.txnNumber !== undefined && body.deletes.some((s) => s.limit === 0))
      throw notRetryable('a delete with limit: 0');
    const refusals = await this.hintRefusals(ns, body.deletes);
    const statements: DeleteStatement[] = body.deletes.map((s, i) => ({
      q: documentFromWire(s.q),
      limit: s.limit,
      ...(s.collation !== undefined ? { collation: s.collation } : {}),
      ...refusals[i],
    }));
    const routing = await this.cluster.routingForWrite(ns);
    if (statements.some((s) => s.refusal === undefined && isWriteWithoutShardKey(deleteShape(s), routing))) {
      if (statements.length === 1) {
        const statement = statements[0]!;
        const send = async (phase: WithoutShardKeyPhase, q: ValueObject) =>
          this.deleteResponse(await this.executeDelete(ns, body, [{ ...statement, q }], session, transaction, phase));
        return this.runWithoutShardKey(ns, { ...statement, let: body.let }, session, transaction, send, noneDeleted);
      }
      return eachStatement(
        statements.length,
        body.ordered,
        (i) => this.deleteWith(ns, { ...body, deletes: [body.deletes[i]!] }, statementOf(session, i), transaction),
        noneDeleted,
      );
    }
    return this.deleteResponse(await this.executeDelete(ns, body, statements, session, transaction));
  }

  private executeDelete(
    ns: string,
    body: DeleteBody,
    statements: readonly DeleteStatement[],
    session: CommandSession | undefined,
    transaction: RouterTransaction | undefined,
    phase?: WithoutShardKeyPhase,
  ): Promise<WriteExecution<DeleteCommandResult>> {
    return this.execute<DeleteCommandResult>(
      ns,
      statements.length,
      body.ordered,
      (index, routing) => {
        const statement = statements[index]!;
        if (statement.refusal !== undefined) throw statement.refusal;
        if (phase === 'probe') return routeFilter({}, routing);
        // The write phase names its document by its exact shard key, whatever the collation.
        const shape = phase === 'write' ? { ...deleteShape(statement), collation: undefined } : deleteShape(statement);
        if (transaction !== undefined)
          checkUnmovedSince(routing, { filter: writeTargetingFilter(shape, routing) }, transaction.atClusterTime);
        return routeWrite(shape, routing);
      },
      (batch, routing) =>
        this.cluster.shard(batch.shard).then((client) =>
          client.delete({
            ns,
            ...routing.versioningFor(batch.shard),
            ...sessionFields(this.transactions, session, transaction, batch),
            ...(phase !== undefined ? { withoutShardKey: phase } : {}),
            ordered: body.ordered,
            ...(body.let !== undefined ? { let: body.let } : {}),
            deletes: batch.indexes.map((i) => {
              const s = statements[i]!;
              return {
                q: toWire(s.q) as Record<string, unknown>,
                limit: s.limit,
                ...(s.collation !== undefined ? { collation: s.collation } : {}),
              };
            }),
          }),
        ),
      transaction,
    );
  }

  private deleteResponse(execution: WriteExecution<DeleteCommandResult>): DeleteResponse {
    const deletedCount = execution.replies.reduce((sum, { reply }) => sum + reply.deletedCount, 0);
    return { deletedCount, writeErrors: publicErrors(execution), ...this.retried(execution), ok: 1 };
  }

  /** Per statement, `{ refusal }` when its `hint` names no index of the collection (MongoDB's BadValue write error). */
  private async hintRefusals(ns: string, statements: ReadonlyArray<{ hint?: unknown }>): Promise<Array<{ refusal?: TesseraError }>> {
    const missing = await this.indexes.missingHints(
      ns,
      statements.map((s) => s.hint),
    );
    return statements.map(({ hint }) => (hint !== undefined && missing.has(JSON.stringify(hint)) ? { refusal: badHint(hint) } : {}));
  }

  /** The user's statements the shards answered from the session's history (MongoDB's `retriedStmtIds`), when any. */
  private retried(execution: WriteExecution<ShardWriteReply & { retriedStmtIds?: number[] }>): { retriedStmtIds?: number[] } {
    const retried = execution.replies.flatMap(({ reply }) => reply.retriedStmtIds ?? []).sort((a, b) => a - b);
    if (retried.length === 0) return {};
    this.sessions.noteRetried(retried.length);
    return { retriedStmtIds: retried };
  }

  private async execute<R extends ShardWriteReply>(
    ns: string,
    count: number,
    ordered: boolean,
    target: (index: number, routing: CollectionRouting) => string[],
    send: (batch: ChildBatch, routing: CollectionRouting) => Promise<R>,
    transaction?: RouterTransaction,
  ): Promise<WriteExecution<R>> {
    let routing: CollectionRouting | undefined;
    const execution = await executeWriteBatch<R>(count, ordered, {
      route: async (indexes): Promise<StatementRouting> => {
        routing = await this.cluster.routingForWrite(ns);
        const statements: RoutedStatement[] = [];
        const routerErrors: RouterWriteError[] = [];
        for (const index of indexes) {
          try {
            statements.push({ index, shards: target(index, routing) });
          } catch (error) {
            if (!(error instanceof TesseraError)) throw error;
            routerErrors.push({ index, error: envelopeOf(error) });
          }
        }
        return { statements, routerErrors };
      },
      send: (batch) => send(batch, routing!),
      // A transaction's statement is not sent again on stale routing (its participant aborted),
      // but the cache is marked stale for the transaction's retry.
      handleStale: (error) => this.cluster.handleStale(ns, error) && transaction === undefined,
    });
    // In a transaction any statement's error aborts the transaction (`TransactionRouter.run`).
    const failed = transaction === undefined ? undefined : execution.writeErrors[0];
    if (failed !== undefined) throw TesseraError.fromEnvelope(failed.error);
    await this.failpoints.pauseAt('router.write.beforeReply', ns);
    return execution;
  }
}

function publicErrors(execution: WriteExecution<unknown>): PublicWriteError[] {
  return execution.writeErrors.map(({ index, error }) => publicWriteError(index, error));
}

/** A document of an insert as it goes to its shard, and its `_id` as the reply shows it. */
interface WireInsert {
  /** As it came, or with a generated `_id` first. */
  readonly document: Readonly<Record<string, unknown>>;
  /** Relaxed Extended JSON. */
  readonly id: unknown;
}

/** Checks statement `index` of an insert (see `checkInsertFields`) and gives it an `_id` when it has none. Throws `BAD_VALUE` or `FAILED_TO_PARSE`. */
function wireInsert(json: Readonly<Record<string, unknown>>, index: number): WireInsert {
  if (!Object.hasOwn(json, '_id')) {
    checkInsertFields(json, undefined, index);
    const id = { $oid: new ObjectId().toHexString() };
    return { document: { _id: id, ...json }, id };
  }
  const id = fromWire(json['_id']);
  checkInsertFields(json, id, index);
  return { document: json, id: toWire(id) };
}
