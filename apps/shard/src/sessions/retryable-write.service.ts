import { Injectable } from '@nestjs/common';
import { DataSource, type EntityManager } from 'typeorm';
import { TesseraError } from '@tessera/core';
import type { ExecutedStatement, ImageKind, StatementHistory, StatementResult } from '../documents/statement-history.js';
import type { RetryableWrite } from './retryable-write.js';
import { type CheckedOutSession, SessionCatalog } from './session-catalog.js';
import { ShardSessions } from './shard-sessions.service.js';
import { TransactionsStore } from './transactions.store.js';

/**
 * Runs write commands as retryable writes (sharding-internals.md, "Retryable writes"), one
 * method per step:
 *
 * 1. `checkOut` the session: one operation of a session at a time in this process.
 * 2. `beginWrite`: lock the session's row, compare txnNumbers (an older one is refused, a newer
 *    one forgets the older's history) and read which of the command's statements already ran.
 * 3. The write path runs the statements that did not, and `recordStatements` records each in
 *    the transaction of its write, after checking under the row lock that the session is still
 *    at the txnNumber.
 * 4. `checkIn`, with the answer listing the statements answered from history.
 *
 * Step 2 commits on its own, before the statements run: a refused txnNumber fails the whole
 * command, while a statement's failure inside its transaction is a write error of that
 * statement. A txnNumber started by a command whose statements all failed stays started, as
 * MongoDB's in-memory transaction state does.
 */
@Injectable()
export class RetryableWriteService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly catalog: SessionCatalog,
    private readonly store: TransactionsStore,
    private readonly sessions: ShardSessions,
  ) {}

  /**
   * Runs `work` as `write` on the collection `collectionUuid` (an ordinary write when `write`
   * is undefined) and adds `retriedStmtIds` to its answer.
   */
  async run<T extends object>(
    write: RetryableWrite | undefined,
    collectionUuid: string,
    work: (history: StatementHistory | undefined) => Promise<T>,
  ): Promise<T & { retriedStmtIds?: number[] }> {
    if (write === undefined) return work(undefined);
    this.sessions.use(write.lsid, write.txnNumber);
    const session = await this.checkOut(write);
    try {
      const history = await this.beginWrite(write, collectionUuid);
      const result = await work(history);
      if (history.retriedStmtIds.length === 0) return result;
      this.sessions.noteRetryAnswered(write.lsid, history.retriedStmtIds.length);
      return { ...result, retriedStmtIds: history.retriedStmtIds };
    } finally {
      session.checkIn();
    }
  }

  /** Step 1: waits until no other operation of this process holds the session, then holds it. */
  checkOut(write: RetryableWrite): Promise<CheckedOutSession> {
    return this.catalog.checkOut(write.lsid);
  }

  /**
   * Step 2, with the session checked out: brings the session to `write.txnNumber` and answers
   * its history for the command's statements. Throws TRANSACTION_TOO_OLD, changing nothing,
   * when the session already started a newer txnNumber.
   */
  async beginWrite(write: RetryableWrite, collectionUuid: string): Promise<SessionHistory> {
    return this.dataSource.transaction(async (manager) => {
      const stored = await this.store.lockSession(manager, write.lsid, write.txnNumber);
      if (stored > write.txnNumber) {
        throw new TesseraError(
          'TRANSACTION_TOO_OLD',
          `Retryable write with txnNumber ${write.txnNumber} is prohibited on session ${write.lsid} because a newer retryable write with txnNumber ${stored} has already started on this session.`,
          { details: { lsid: write.lsid, txnNumber: write.txnNumber, activeTxnNumber: stored } },
        );
      }
      if (stored < write.txnNumber) {
        await this.store.startTxnNumber(manager, write.lsid, write.txnNumber);
        return new SessionHistory(this, write, collectionUuid, new Map(), undefined);
      }
      const executed = await this.store.executedStatements(manager, write.lsid, write.txnNumber, write.stmtIds);
      const needsImage = [...executed.values()].some((r) => r.op === 'findAndModify' && r.image !== undefined);
      const image = needsImage ? await this.store.image(manager, write.lsid, write.txnNumber) : undefined;
      return new SessionHistory(this, write, collectionUuid, executed, image);
    });
  }

  /**
   * Step 3, in the write's transaction: records the statements it executed (and a
   * findAndModify's image). Throws TRANSACTION_TOO_OLD, which rolls the write back, when the
   * session left the txnNumber meanwhile: only another process on this database can do that,
   * the checkout keeps this one's operations apart.
   */
  async recordStatements(
    manager: EntityManager,
    write: RetryableWrite,
    collectionUuid: string,
    statements: readonly ExecutedStatement[],
    image: { kind: ImageKind; document: unknown } | undefined,
  ): Promise<void> {
    if (statements.length === 0) return;
    const records = statements.map((s) => ({ stmtId: write.stmtIds[s.index]!, shardKey: s.shardKey, result: s.result }));
    if (!(await this.store.recordStatements(manager, write.lsid, write.txnNumber, collectionUuid, records))) {
      throw new TesseraError(
        'TRANSACTION_TOO_OLD',
        `Retryable write with txnNumber ${write.txnNumber} on session ${write.lsid} was overtaken by a newer txnNumber while it ran.`,
        { details: { lsid: write.lsid, txnNumber: write.txnNumber } },
      );
    }
    if (image !== undefined) await this.store.recordImage(manager, write.lsid, write.txnNumber, image.kind, image.document);
  }
}

/** One retryable command's view of its session's history (the write paths' `StatementHistory`). */
export class SessionHistory implements StatementHistory {
  /** The stmtIds answered from history, in the order the write path asked. */
  readonly retriedStmtIds: number[] = [];

  constructor(
    private readonly service: RetryableWriteService,
    private readonly write: RetryableWrite,
    private readonly collectionUuid: string,
    private readonly executedByStmtId: ReadonlyMap<number, StatementResult>,
    private readonly recordedImage: { kind: ImageKind; document: unknown } | undefined,
  ) {}

  executed(index: number): StatementResult | undefined {
    const stmtId = this.write.stmtIds[index]!;
    const result = this.executedByStmtId.get(stmtId);
    if (result !== undefined) this.retriedStmtIds.push(stmtId);
    return result;
  }

  image(): { kind: ImageKind; document: unknown } | undefined {
    return this.recordedImage;
  }

  record(manager: EntityManager, statements: readonly ExecutedStatement[], image?: { kind: ImageKind; document: unknown }): Promise<void> {
    return this.service.recordStatements(manager, this.write, this.collectionUuid, statements, image);
  }
}
