import { TesseraError } from '@tessera/core';
import type { SessionPart } from '@tessera/protocol';
import type { CommandSession } from '../api/session-fields.js';
import type { RouterTransaction, TransactionRouter } from '../transactions/transaction-router.service.js';
import { type TransactionBody, transactionStatementOf } from '../transactions/transaction-fields.js';
import type { ChildBatch } from './write-plan.js';

/**
 * Runs a write command's `work` in the transaction it is a statement of (started by it when it
 * says so; any failure aborts the transaction, `TransactionRouter.run`), or outside one.
 */
export async function runAsStatement<T>(
  transactions: TransactionRouter,
  body: TransactionBody,
  session: CommandSession | undefined,
  work: (transaction: RouterTransaction | undefined) => Promise<T>,
): Promise<T> {
  const of = transactionStatementOf(body, session);
  if (of === undefined) return work(undefined);
  const transaction = await transactions.statement(of);
  return transactions.run(transaction, () => work(transaction));
}

/** A write command's session fields for a shard: its transaction's, or a retryable write's. */
export function sessionFields(
  transactions: TransactionRouter,
  session: CommandSession | undefined,
  transaction: RouterTransaction | undefined,
  batch: Pick<ChildBatch, 'indexes' | 'shard'>,
) {
  if (transaction !== undefined) return { transaction: transactions.fieldsFor(transaction, batch.shard, true) };
  return sessionPartOf(session, batch) ?? {};
}

/**
 * The fields that make a shard's part of a command retryable, as a session part: the session,
 * its txnNumber, and each statement's stmtId, its index in the user's command, so a retry
 * however split or re-routed names the same statements. Undefined outside a retryable write.
 */
export function sessionPartOf(session: CommandSession | undefined, batch: Pick<ChildBatch, 'indexes'>): SessionPart | undefined {
  if (session?.txnNumber === undefined) return undefined;
  const base = session.stmtIdBase ?? 0;
  return { lsid: session.lsid, txnNumber: session.txnNumber, stmtIds: batch.indexes.map((index) => base + index) };
}

/** `session` with its statements numbered from `stmtIdBase` (see `CommandSession.stmtIdBase`). */
export function numbered(session: CommandSession | undefined, stmtIdBase: number): CommandSession | undefined {
  return session === undefined || stmtIdBase === 0 ? session : { ...session, stmtIdBase };
}

/** The session of statement `index` of a command sent alone (its stmtId kept: see `numbered`). */
export function statementOf(session: CommandSession | undefined, index: number): CommandSession | undefined {
  return numbered(session, (session?.stmtIdBase ?? 0) + index);
}

/** A retryable write outside a transaction: its statements leave records a retry is answered from. */
export function isRetryableWrite(session: CommandSession | undefined, transaction: RouterTransaction | undefined): boolean {
  return transaction === undefined && session?.txnNumber !== undefined;
}

/** MongoDB runs multi-document writes once but cannot promise a retry does not apply them again. */
export function notRetryable(what: string): TesseraError {
  return new TesseraError('INVALID_OPTIONS', `${what} cannot be a retryable write: send it without txnNumber`);
}
