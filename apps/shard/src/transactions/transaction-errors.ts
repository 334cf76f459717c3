import { type ErrorCode, TesseraError, labelInTransaction } from '@tessera/core';

/** Postgres' SQLSTATEs that are a transaction's conflict with another, by the error they are. */
const POSTGRES_CONFLICTS: Readonly<Record<string, ErrorCode>> = {
  /** lock_not_available: `lock_timeout` ran out (maxTransactionLockRequestTimeoutMillis). */
  '55P03': 'LOCK_TIMEOUT',
  /** serialization_failure and deadlock_detected: Postgres chose this transaction to fail. */
  '40001': 'WRITE_CONFLICT',
  '40P01': 'WRITE_CONFLICT',
  /** query_canceled: a transaction's statement is cancelled only by wait-die, as a lock wait's victim. */
  '57014': 'LOCK_TIMEOUT',
};

/**
 * An error met inside a transaction as the client sees it: Postgres' conflicts become MongoDB's
 * errors, and an error the transaction may succeed after when retried whole gets the
 * `TransientTransactionError` label.
 */
export function transientInTransaction(error: unknown): unknown {
  const sqlState = (error as { code?: unknown } | null)?.code;
  const conflict = typeof sqlState === 'string' ? POSTGRES_CONFLICTS[sqlState] : undefined;
  const tessera =
    conflict !== undefined
      ? new TesseraError(conflict, `the transaction conflicted with another: ${(error as Error).message}`, { cause: error })
      : error;
  return tessera instanceof TesseraError ? labelInTransaction(tessera) : tessera;
}
