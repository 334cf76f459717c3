import { Injectable } from '@nestjs/common';
import { TesseraError } from '@tessera/core';
import type { PublicWriteError } from '../api/extended-json.js';
import { parseNamespace } from '../api/namespace.js';
import type { BulkWriteBody } from '../api/request-schemas.js';
import type { DeleteResponse, InsertResponse, UpdateResponse } from './write-responses.js';
import { WriteService } from './write.service.js';

type BulkOp = BulkWriteBody['ops'][number];

/** One operation's outcome in the reply's cursor, by its index in `ops` (MongoDB's bulkWrite reply item). */
export type BulkOpResult =
  | { ok: 1; idx: number; n: number; nModified?: number; upserted?: { _id: unknown } }
  | ({ ok: 0; idx: number } & Omit<PublicWriteError, 'index'>);

export interface BulkWriteReply {
  ok: 1;
  nErrors: number;
  nInserted: number;
  nMatched: number;
  nModified: number;
  nUpserted: number;
  nDeleted: number;
  /** The operations' results in `ops` order (only the failed ones with `errorsOnly`); one batch. */
  cursor: { id: '0'; ns: 'admin.$cmd.bulkWrite'; firstBatch: BulkOpResult[] };
  retriedStmtIds?: number[];
}

/** A run of operations sent as one command: consecutive inserts into one namespace, or one update or delete. */
interface Group {
  ns: string;
  first: number;
  ops: BulkOp[];
}

/**
 * MongoDB 8.0's bulkWrite on the router: operations on several namespaces in one request, run in
 * `ops` order as the insert, update and delete commands run them (routing, stale retries,
 * transactions). Consecutive inserts into one namespace go as one insert command; each update
 * and delete goes alone, so that its own matched, modified and deleted counts are known, as the
 * reply gives them per operation. Ordered, it stops after the first failed operation; unordered,
 * it runs them all. Retryable with `lsid` and `txnNumber`: each operation's stmtId is its index
 * in `ops`, however the commands split them, so a retry runs none twice (an update with `multi`
 * or a delete of many is refused there, as MongoDB refuses it in a retryable write).
 */
@Injectable()
export class BulkWriteService {
  constructor(private readonly writes: WriteService) {}

  async bulkWrite(body: BulkWriteBody): Promise<BulkWriteReply> {
    const namespaces = body.nsInfo.map(({ ns }) => parseNamespace(ns, 'nsInfo'));
    const groups = groupsOf(body.ops, namespaces);
    const reply: BulkWriteReply = {
      ok: 1,
      nErrors: 0,
      nInserted: 0,
      nMatched: 0,
      nModified: 0,
      nUpserted: 0,
      nDeleted: 0,
      cursor: { id: '0', ns: 'admin.$cmd.bulkWrite', firstBatch: [] },
    };
    const retried: number[] = [];
    const results: BulkOpResult[] = [];
    for (const [g, group] of groups.entries()) {
      const session = {
        ...(body.lsid !== undefined ? { lsid: body.lsid } : {}),
        ...(body.txnNumber !== undefined ? { txnNumber: body.txnNumber } : {}),
        ...(body.autocommit !== undefined ? { autocommit: body.autocommit } : {}),
        // A transaction starts with the first command it runs; the others continue it.
        ...(body.startTransaction !== undefined && g === 0 ? { startTransaction: body.startTransaction } : {}),
      };
      const outcome = await this.runGroup(group, body.ordered, { ...session, ...(body.let !== undefined ? { let: body.let } : {}) });
      results.push(...outcome.results);
      retried.push(...(outcome.retriedStmtIds ?? []));
      if (body.ordered && outcome.results.some((r) => r.ok === 0)) break;
    }
    for (const result of results) {
      if (result.ok === 0) {
        reply.nErrors++;
        continue;
      }
      const op = body.ops[result.idx]!;
      if ('insert' in op) reply.nInserted += result.n;
      else if ('delete' in op) reply.nDeleted += result.n;
      else {
        reply.nMatched += result.n - (result.upserted === undefined ? 0 : 1);
        reply.nModified += result.nModified ?? 0;
        if (result.upserted !== undefined) reply.nUpserted++;
      }
    }
    reply.cursor.firstBatch = body.errorsOnly ? results.filter((r) => r.ok === 0) : results;
    if (retried.length > 0) reply.retriedStmtIds = retried.sort((a, b) => a - b);
    return reply;
  }

  /** Runs one group as its command; the results name operations by their index in `ops`. */
  private async runGroup(
    group: Group,
    ordered: boolean,
    /** The session fields, and `let` for an update or delete. */
    fields: Record<string, unknown>,
  ): Promise<{ results: BulkOpResult[]; retriedStmtIds?: number[] }> {
    const { let: letSpec, ...session } = fields;
    const [op] = group.ops as [BulkOp];
    if ('insert' in op) {
      const documents = group.ops.map((o) => (o as Extract<BulkOp, { insert: number }>).document);
      const answer: InsertResponse & { retriedStmtIds?: number[] } = await this.writes.insert(
        group.ns,
        { documents, ordered, ...session } as never,
        undefined,
        group.first,
      );
      const failed = new Map(answer.writeErrors.map((e) => [e.index, e]));
      const results: BulkOpResult[] = [];
      for (let i = 0; i < documents.length; i++) {
        const error = failed.get(i);
        if (error !== undefined) results.push(errorResult(group.first + i, error));
        else if (Object.hasOwn(answer.insertedIds, String(i))) results.push({ ok: 1, idx: group.first + i, n: 1 });
        // An ordered insert stops at its first failure: the documents after it were not tried.
        if (error !== undefined && ordered) break;
      }
      return { results, ...retriedOf(answer) };
    }
    if ('update' in op) {
      const answer: UpdateResponse & { retriedStmtIds?: number[] } = await this.writes.update(
        group.ns,
        {
          updates: [
            {
              q: op.filter,
              u: op.updateMods,
              multi: op.multi,
              upsert: op.upsert,
              ...(op.arrayFilters ? { arrayFilters: op.arrayFilters } : {}),
              ...(op.collation ? { collation: op.collation } : {}),
            },
          ],
          ordered: true,
          ...(letSpec !== undefined ? { let: letSpec } : {}),
          ...session,
        } as never,
        group.first,
      );
      const error = answer.writeErrors[0];
      if (error !== undefined) return { results: [errorResult(group.first, error)], ...retriedOf(answer) };
      const upserted = answer.upsertedIds['0'];
      return {
        results: [
          {
            ok: 1,
            idx: group.first,
            n: answer.matchedCount + answer.upsertedCount,
            nModified: answer.modifiedCount,
            ...(upserted !== undefined ? { upserted: { _id: upserted } } : {}),
          },
        ],
        ...retriedOf(answer),
      };
    }
    const answer: DeleteResponse & { retriedStmtIds?: number[] } = await this.writes.delete(
      group.ns,
      {
        deletes: [{ q: op.filter, limit: op.multi ? 0 : 1, ...(op.collation ? { collation: op.collation } : {}) }],
        ordered: true,
        ...(letSpec !== undefined ? { let: letSpec } : {}),
        ...session,
      } as never,
      group.first,
    );
    const error = answer.writeErrors[0];
    if (error !== undefined) return { results: [errorResult(group.first, error)], ...retriedOf(answer) };
    return { results: [{ ok: 1, idx: group.first, n: answer.deletedCount }], ...retriedOf(answer) };
  }
}

/** Consecutive inserts into one namespace form a group; every update and delete is a group of its own. */
function groupsOf(ops: readonly BulkOp[], namespaces: readonly string[]): Group[] {
  const groups: Group[] = [];
  ops.forEach((op, idx) => {
    const index = 'insert' in op ? op.insert : 'update' in op ? op.update : op.delete;
    const ns = namespaces[index];
    if (ns === undefined) {
      throw new TesseraError(
        'BAD_VALUE',
        `BulkWrite ops entry ${idx} refers to namespace index ${index}, but nsInfo has ${namespaces.length}.`,
        {
          details: { field: `ops.${idx}` },
        },
      );
    }
    const last = groups[groups.length - 1];
    if ('insert' in op && last !== undefined && last.ns === ns && 'insert' in last.ops[0]!) last.ops.push(op);
    else groups.push({ ns, first: idx, ops: [op] });
  });
  return groups;
}

function errorResult(idx: number, error: PublicWriteError): BulkOpResult {
  const { index: _index, ...rest } = error;
  return { ok: 0, idx, ...rest };
}

function retriedOf(answer: { retriedStmtIds?: number[] }): { retriedStmtIds?: number[] } {
  return answer.retriedStmtIds === undefined ? {} : { retriedStmtIds: answer.retriedStmtIds };
}
