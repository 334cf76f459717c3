import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { TesseraError } from '@tessera/core';
import type {
  ExecutedStatement,
  ImageKind,
  StatementHistory,
  StatementRecording,
  StatementResult,
} from '../documents/statement-history.js';
import type { RetryableWrite } from './retryable-write.js';
import { type CheckedOutSession, SessionCatalog, type SessionTxnState } from './session-catalog.js';
import { SessionRecords } from './session-records.service.js';
import { ShardSessions } from './shard-sessions.service.js';
import { type SessionRecordPart, TransactionsStore } from './transactions.store.js';

/**
 * Runs write commands as retryable writes (sharding-internals.md, "Retryable writes"), one
 * method per step:
 *
 * 1. `checkOut` the command's sessions: one operation of a session at a time in this process.
 * 2. `beginWrite`: compare txnNumbers with the session's state (SessionCatalog), loading it from
 *    the transactions table at its first use: an older one is refused, a newer one starts with
 *    no history, an equal one answers which of the command's statements already ran.
 * 3. The write path runs the statements that did not, and records each in the transaction (or
 *    the single statement) of its write.
 * 4. `checkIn`, with the answer listing the statements answered from history.
 *
 * A command may carry several sessions' statements, one part each: the router coalesces
 * concurrent retryable inserts. Step 2 changes nothing stored: a refused txnNumber fails the
 * whole command before anything runs, and a txnNumber whose statements all failed is started in
 * memory only, as MongoDB's in-memory transaction state is.
 */
@Injectable()
export class RetryableWriteService {
  constructor(
    private readonly catalog: SessionCatalog,
    private readonly store: TransactionsStore,
    private readonly records: SessionRecords,
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
    const { result, retried } = await this.runParts([write], collectionUuid, work);
    return retried[0]!.length === 0 ? result : { ...result, retriedStmtIds: retried[0]! };
  }

  /**
   * Runs `work` as the retryable writes `parts`, which own the command's statements in order,
   * each as many as its stmtIds; answers the result and, per part, the stmtIds answered from
   * history. A part of an older txnNumber fails the command with TRANSACTION_TOO_OLD naming the
   * part (`details.part`) before anything runs.
   */
  async runParts<T>(
    parts: readonly RetryableWrite[],
    collectionUuid: string,
    work: (history: StatementHistory) => Promise<T>,
  ): Promise<{ result: T; retried: number[][] }> {
    for (const part of parts) this.sessions.use(part.lsid, part.txnNumber);
    const sessions = await this.checkOut(parts);
    try {
      const history = new SessionHistory(this, parts, await this.beginWrite(parts, sessions), collectionUuid);
      const result = await work(history);
      // A write path that made a failed record a write error: the commit's outcome may be unknown.
      if (history.recordFailed) for (const session of sessions.values()) session.setState(undefined);
      for (const [i, stmtIds] of history.retried.entries())
        if (stmtIds.length > 0) this.sessions.noteRetryAnswered(parts[i]!.lsid, stmtIds.length);
      return { result, retried: history.retried };
    } catch (error) {
      // The outcome of a failed write may be unknown (a lost connection after its commit):
      // what is stored is the truth, reloaded at the next use.
      for (const session of sessions.values()) session.setState(undefined);
      throw error;
    } finally {
      for (const session of sessions.values()) session.checkIn();
    }
  }

  /** Step 1: waits until no other operation of this process holds the parts' sessions, then holds them. */
  checkOut(parts: readonly RetryableWrite[]): Promise<Map<string, CheckedOutSession>> {
    return this.catalog.checkOutAll(parts.map((p) => p.lsid));
  }

  /**
   * Step 2, with the sessions checked out: brings each part's session to its txnNumber and
   * answers the states the parts' statements are looked up in. Throws TRANSACTION_TOO_OLD,
   * changing nothing, when a session already started a newer txnNumber.
   */
  async beginWrite(parts: readonly RetryableWrite[], sessions: ReadonlyMap<string, CheckedOutSession>): Promise<SessionTxnState[]> {
    const states: SessionTxnState[] = [];
    for (const [index, write] of parts.entries()) {
      const session = sessions.get(write.lsid)!;
      const state = session.state() ?? (await this.load(write.lsid));
      if (state.txnNumber > write.txnNumber) {
        throw new TesseraError(
          'TRANSACTION_TOO_OLD',
          `Retryable write with txnNumber ${write.txnNumber} is prohibited on session ${write.lsid} because a newer retryable write with txnNumber ${state.txnNumber} has already started on this session.`,
          {
            details: {
              lsid: write.lsid,
              txnNumber: write.txnNumber,
              activeTxnNumber: state.txnNumber,
              ...(parts.length > 1 ? { part: index } : {}),
            },
          },
        );
      }
      if (state.txnNumber < write.txnNumber) {
        Object.assign(state, { txnNumber: write.txnNumber, statements: new Map(), image: undefined, incompleteHistory: false });
      }
      session.setState(state);
      states.push(state);
    }
    return states;
  }

  /** Step 3's SQL: records `parts`' statements in the write's statement; the caller runs it. */
  recording(first: number, collectionUuid: string, parts: readonly SessionRecordPart[]) {
    return this.store.recording(first, collectionUuid, parts);
  }

  /** Step 3 in the write's transaction: records `parts`' statements and a findAndModify's image. */
  async record(
    manager: EntityManager,
    collectionUuid: string,
    parts: readonly SessionRecordPart[],
    image: { lsid: string; txnNumber: number; kind: ImageKind; document: unknown } | undefined,
  ): Promise<void> {
    await this.store.recordStatements(manager, collectionUuid, parts);
    if (image !== undefined) await this.store.recordImage(manager, image.lsid, image.txnNumber, image.kind, image.document);
  }

  private async load(lsid: string): Promise<SessionTxnState> {
    return (await this.records.load(lsid)) ?? { txnNumber: -1, statements: new Map(), image: undefined, incompleteHistory: false };
  }
}

/**
 * One retryable command's view of its sessions' history (the write paths' `StatementHistory`):
 * statement `index` of the command belongs to the part whose range holds it.
 */
export class SessionHistory implements StatementHistory {
  /** Per part, the stmtIds answered from history, in the order the write path asked. */
  readonly retried: number[][];
  /** A `record` failed: what it stored, if anything, is for the table to tell. */
  recordFailed = false;
  /** Per part, the index of its first statement in the command. */
  private readonly offsets: number[] = [];

  constructor(
    private readonly service: RetryableWriteService,
    private readonly parts: readonly RetryableWrite[],
    private readonly states: readonly SessionTxnState[],
    private readonly collectionUuid: string,
  ) {
    this.retried = parts.map(() => []);
    let offset = 0;
    for (const part of parts) {
      this.offsets.push(offset);
      offset += part.stmtIds.length;
    }
  }

  /**
   * Throws INCOMPLETE_TRANSACTION_HISTORY for a statement not recorded under a txnNumber whose
   * migrated history may have missed it: running it again could apply it twice.
   */
  executed(index: number): StatementResult | undefined {
    const result = this.ran(index);
    if (result !== undefined) {
      const [part, stmtId] = this.locate(index);
      this.retried[part]!.push(stmtId);
    }
    return result;
  }

  ran(index: number): StatementResult | undefined {
    const [part, stmtId] = this.locate(index);
    const state = this.states[part]!;
    const result = state.statements.get(stmtId);
    if (result === undefined && state.incompleteHistory) {
      throw new TesseraError(
        'INCOMPLETE_TRANSACTION_HISTORY',
        `Incomplete history detected for transaction ${state.txnNumber} on session ${this.parts[part]!.lsid}: statement ${stmtId} may have run before a chunk migration, which could not bring its record`,
        { details: { lsid: this.parts[part]!.lsid, txnNumber: state.txnNumber, stmtId } },
      );
    }
    return result;
  }

  image(): { kind: ImageKind; document: unknown } | undefined {
    return this.states[0]!.image;
  }

  recording(first: number, statements: readonly ExecutedStatement[]): StatementRecording {
    return this.service.recording(first, this.collectionUuid, this.recordParts(statements));
  }

  async record(
    manager: EntityManager,
    statements: readonly ExecutedStatement[],
    image?: { kind: ImageKind; document: unknown },
  ): Promise<void> {
    if (statements.length === 0) return;
    const first = this.parts[0]!;
    const imageOf = image === undefined ? undefined : { lsid: first.lsid, txnNumber: first.txnNumber, ...image };
    try {
      await this.service.record(manager, this.collectionUuid, this.recordParts(statements), imageOf);
    } catch (error) {
      this.recordFailed = true;
      throw error;
    }
    this.recorded(statements, image);
  }

  recorded(statements: readonly ExecutedStatement[], image?: { kind: ImageKind; document: unknown }): void {
    for (const statement of statements) {
      const [part, stmtId] = this.locate(statement.index);
      this.states[part]!.statements.set(stmtId, statement.result);
    }
    if (image !== undefined) this.states[0]!.image = image;
  }

  /** The parts that executed some of `statements`. */
  private recordParts(statements: readonly ExecutedStatement[]): SessionRecordPart[] {
    const byPart = new Map<number, SessionRecordPart>();
    for (const statement of statements) {
      const [part, stmtId] = this.locate(statement.index);
      let record = byPart.get(part);
      if (record === undefined) {
        const { lsid, txnNumber } = this.parts[part]!;
        byPart.set(part, (record = { lsid, txnNumber, statements: [] }));
      }
      (record.statements as Array<SessionRecordPart['statements'][number]>).push({
        stmtId,
        shardKey: statement.shardKey,
        result: statement.result,
      });
    }
    return [...byPart.values()];
  }

  /** The part owning statement `index` of the command, and the statement's stmtId. */
  private locate(index: number): [number, number] {
    let part = this.parts.length - 1;
    while (this.offsets[part]! > index) part--;
    return [part, this.parts[part]!.stmtIds[index - this.offsets[part]!]!];
  }
}
