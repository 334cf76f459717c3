import { TesseraError } from '@tessera/core';
import type { Lsid, SessionPart } from '@tessera/protocol';

/** A write command run as a retryable write: its session, the session's txnNumber, one stmtId per statement. */
export interface RetryableWrite {
  lsid: string;
  txnNumber: number;
  /** The stmtId of each statement of the command, by its index. */
  stmtIds: readonly number[];
}

/** The retryable-write fields of a write command, as the protocol parses them. */
export interface RetryableFields {
  lsid?: Lsid | undefined;
  txnNumber?: number | undefined;
  stmtIds?: number[] | undefined;
}

/**
 * The retryable writes of an insert: one per session part when the command has `sessionParts`
 * (each part's stmtIds distinct, the parts' sessions distinct, their documents adding up to the
 * command's), else what `retryableWriteOf` makes of its fields. Throws before anything runs.
 */
export function retryableInsertOf(
  command: RetryableFields & { sessionParts?: SessionPart[] | undefined },
  documents: readonly unknown[],
): RetryableWrite[] | undefined {
  if (command.sessionParts === undefined) {
    const write = retryableWriteOf(command, documents);
    return write === undefined ? undefined : [write];
  }
  if (command.lsid !== undefined || command.txnNumber !== undefined || command.stmtIds !== undefined) {
    throw new TesseraError('INVALID_OPTIONS', 'sessionParts replace lsid, txnNumber and stmtIds: give one or the other');
  }
  const parts = command.sessionParts;
  const owned = parts.reduce((sum, part) => sum + part.stmtIds.length, 0);
  if (owned !== documents.length) {
    throw new TesseraError('BAD_VALUE', `the sessionParts own ${owned} document(s) of ${documents.length}`);
  }
  if (new Set(parts.map((p) => p.lsid.id)).size !== parts.length) throw new TesseraError('BAD_VALUE', 'a session has one part per command');
  for (const part of parts) {
    if (new Set(part.stmtIds).size !== part.stmtIds.length)
      throw new TesseraError('BAD_VALUE', 'the stmtIds of a command must be distinct');
  }
  return parts.map((part) => ({ lsid: part.lsid.id, txnNumber: part.txnNumber, stmtIds: part.stmtIds }));
}

/**
 * The retryable write a command asks for, or undefined for an ordinary write (no txnNumber; an
 * lsid alone asks for nothing durable). Without `stmtIds` the statements are numbered by their
 * index, as a mongod numbers a command a driver sent it directly. `refusal` names why a
 * statement cannot be retried (a multi-document update or delete: MongoDB refuses those in
 * retryable writes, since a retry could not tell which documents the first attempt changed).
 * Throws before anything runs: bad input never half-applies.
 */
export function retryableWriteOf<S>(
  command: RetryableFields,
  statements: readonly S[],
  refusal: (statement: S) => string | undefined = () => undefined,
): RetryableWrite | undefined {
  if (command.txnNumber === undefined) {
    if (command.stmtIds !== undefined) throw new TesseraError('INVALID_OPTIONS', 'stmtIds were given without a txnNumber');
    return undefined;
  }
  if (command.lsid === undefined) {
    throw new TesseraError('INVALID_OPTIONS', 'a txnNumber requires a session id (lsid) to also be specified');
  }
  const stmtIds = command.stmtIds ?? statements.map((_, index) => index);
  if (stmtIds.length !== statements.length) {
    throw new TesseraError('BAD_VALUE', `a command of ${statements.length} statement(s) came with ${stmtIds.length} stmtId(s)`, {
      details: { statements: statements.length, stmtIds: stmtIds.length },
    });
  }
  if (new Set(stmtIds).size !== stmtIds.length) throw new TesseraError('BAD_VALUE', 'the stmtIds of a command must be distinct');
  for (const [index, statement] of statements.entries()) {
    const reason = refusal(statement);
    if (reason !== undefined) {
      throw new TesseraError('INVALID_OPTIONS', `statement ${index}: ${reason} cannot be retried; send it without a txnNumber`, {
        details: { index },
      });
    }
  }
  return { lsid: command.lsid.id, txnNumber: command.txnNumber, stmtIds };
}
