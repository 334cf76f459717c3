import { Long, ObjectId } from 'bson';
import {
  type ErrorCode,
  type ErrorEnvelope,
  ERROR_CODES,
  TesseraError,
  type Value,
  duplicateKeyFields,
  type ValueObject,
  fromExtendedJsonObject,
  toExtendedJsonObject,
} from '@tessera/core';

/** Reads an Extended JSON object (already parsed from JSON) into a value. Throws `FAILED_TO_PARSE` for a malformed wrapper. */
export function fromWire(json: unknown): Value {
  return fromExtendedJsonObject(json);
}

/** Reads an Extended JSON document. Throws as `fromWire`. */
export function documentFromWire(json: Record<string, unknown>): ValueObject {
  return fromExtendedJsonObject(json) as ValueObject;
}

/** Writes a value as relaxed Extended JSON (int64 beyond 2^53 as `$numberLong`). */
export function toWire(value: Value): unknown {
  return toExtendedJsonObject(value);
}

/**
 * The `{id}` of the single-document routes: 24 hex digits are an ObjectId, an integer literal
 * a number (an int64 beyond 2^53 a Long), anything else the string itself. A string `_id` that
 * looks like an ObjectId or a number cannot be reached this way; use `find` with a filter.
 */
export function documentIdFromPath(id: string): Value {
  if (/^[0-9a-fA-F]{24}$/.test(id)) return new ObjectId(id);
  if (/^-?(0|[1-9]\d{0,18})$/.test(id)) {
    const big = BigInt(id);
    if (big >= BigInt(Number.MIN_SAFE_INTEGER) && big <= BigInt(Number.MAX_SAFE_INTEGER)) return Number(big);
    if (big >= -(2n ** 63n) && big < 2n ** 63n) return Long.fromBigInt(big);
  }
  return id;
}

/** A write error as the public API shows it: MongoDB's `{ index, code, codeName, errmsg }` plus details. */
export interface PublicWriteError {
  index: number;
  code: number;
  codeName: string;
  errmsg: string;
  /** A duplicate key's index pattern and the values that clashed, where MongoDB's drivers read them. */
  keyPattern?: unknown;
  keyValue?: unknown;
  details?: Record<string, unknown>;
}

/** Renders a write error by the user's statement index. */
export function publicWriteError(index: number, error: ErrorEnvelope): PublicWriteError {
  const known = ERROR_CODES[error.code] ?? ERROR_CODES.INTERNAL;
  return {
    index,
    code: known.code,
    codeName: known.codeName,
    errmsg: error.message,
    ...duplicateKeyFields(error),
    ...(error.details ? { details: error.details } : {}),
  };
}

const CODES_BY_NAME = new Map<string, ErrorCode>(Object.entries(ERROR_CODES).map(([code, { codeName }]) => [codeName, code as ErrorCode]));

/** The error a public write error stands for (the single-document routes answer it as a request error). */
export function errorFromPublic(error: PublicWriteError): TesseraError {
  return new TesseraError(
    CODES_BY_NAME.get(error.codeName) ?? 'INTERNAL',
    error.errmsg,
    error.details === undefined ? {} : { details: error.details },
  );
}
