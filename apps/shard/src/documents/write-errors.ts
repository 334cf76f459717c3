import { type ErrorEnvelope, TesseraError, type Value, toExtendedJsonObject } from '@tessera/core';
import { databaseErrorCode } from '@tessera/platform';

/** A statement that failed, by its index in the request, with MongoDB's error shape. */
export interface WriteError {
  index: number;
  error: ErrorEnvelope;
}

/** Postgres' unique_violation, from the driver (`poolStatement`) or wrapped by TypeORM in a QueryFailedError. */
export function isUniqueViolation(error: unknown): boolean {
  return databaseErrorCode(error) === '23505';
}

/** E11000: the `_id` (or the unique shard key) of `row` is taken in collection `ns`. */
export function duplicateKey(ns: string, row: { _id: Value; index: number }, idTaken: boolean): ErrorEnvelope {
  const id = toExtendedJsonObject(row._id);
  const message = idTaken
    ? `E11000 duplicate key error collection: ${ns} dup key: { _id: ${JSON.stringify(id)} }`
    : `E11000 duplicate key error collection: ${ns}: another document has the same unique shard key`;
  return new TesseraError('DUPLICATE_KEY', message, {
    details: { index: row.index, keyValue: idTaken ? { _id: id } : { shardKey: true } },
  }).toEnvelope();
}

/** `error` as the failure of the statement at `index`. */
export function withStatement(error: TesseraError, index: number): ErrorEnvelope {
  return new TesseraError(error.code, error.message, { details: { ...error.details, index } }).toEnvelope();
}

/** A statement's failure as MongoDB shows it; anything but a `TesseraError` is `INTERNAL`. */
export function toEnvelope(error: unknown): ErrorEnvelope {
  if (error instanceof TesseraError) return error.toEnvelope();
  return new TesseraError('INTERNAL', (error as Error).message).toEnvelope();
}
