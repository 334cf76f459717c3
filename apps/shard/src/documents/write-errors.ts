import {
  type ErrorEnvelope,
  type ShardKeyPattern,
  TesseraError,
  type Value,
  decodeKey,
  shardKeyPatternToObject,
  toExtendedJsonObject,
} from '@tessera/core';
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

/**
 * E11000: the `_id` (or the unique shard key) of `row` is taken in collection `ns`, with MongoDB's
 * `keyPattern` and `keyValue` of the index that refused it (the router lifts them to the top of
 * the write error, where drivers read them).
 */
export function duplicateKey(
  ns: string,
  pattern: ShardKeyPattern,
  row: { _id: Value; index: number; shardKey: Uint8Array },
  idTaken: boolean,
): ErrorEnvelope {
  const keyPattern = idTaken ? { _id: 1 } : shardKeyPatternToObject(pattern);
  const values = idTaken ? [row._id] : decodeKey(row.shardKey);
  const keyValue = Object.fromEntries(Object.keys(keyPattern).map((field, i) => [field, toExtendedJsonObject(values[i] ?? null)]));
  const index = idTaken ? '_id_' : 'the unique shard key';
  return new TesseraError(
    'DUPLICATE_KEY',
    `E11000 duplicate key error collection: ${ns} index: ${index} dup key: { ${Object.entries(keyValue)
      .map(([field, value]) => `${field}: ${JSON.stringify(value)}`)
      .join(', ')} }`,
    {
      details: { index: row.index, keyPattern, keyValue },
    },
  ).toEnvelope();
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
