/**
 * The router's update and delete statements as the write path carries them: filters decoded,
 * the rest as the client sent it (the shards read it), with what targeting reads of them.
 */
import { TesseraError, type Value, type ValueObject } from '@tessera/core';
import { isOperatorUpdate } from '@tessera/query';
import type { UpdateBody } from '../api/request-schemas.js';
import { collationOf } from '../reads/query.service.js';
import type { WriteShape } from './write-targeting.js';

export interface UpdateStatement {
  q: ValueObject;
  u: Value;
  multi: boolean;
  upsert: boolean;
  /** As the client sent them (Extended JSON): the shard reads them. */
  arrayFilters?: Array<Record<string, unknown>>;
  /** As the client sent it (Extended JSON): the shard reads it; targeting reads it parsed (`collationOf`). */
  collation?: Record<string, unknown>;
  /** Constants of a pipeline update, as the client sent them (Extended JSON). */
  c?: Record<string, unknown>;
  /** With `upsert`: insert `c.new` when nothing matches (see `InternalUpdateBody`). */
  upsertSupplied?: boolean;
  /** Why the router refuses the statement before sending it (its `hint` names no index). */
  refusal?: TesseraError;
}

/**
 * An update as the router's own callers may give it: `$merge` also sets a statement's
 * `upsertSupplied`, which the public schema does not have.
 */
export type InternalUpdateBody = Omit<UpdateBody, 'updates'> & {
  updates: Array<UpdateBody['updates'][number] & { upsertSupplied?: boolean }>;
};

export interface DeleteStatement {
  q: ValueObject;
  limit: 0 | 1;
  /** As for `UpdateStatement`. */
  collation?: Record<string, unknown>;
  refusal?: TesseraError;
}

/** What targeting reads of an update statement. */
export function updateShape(s: UpdateStatement): WriteShape {
  return { filter: s.q, single: !s.multi, upsert: s.upsert, operation: 'update', collation: collationOf(s) };
}

/** What targeting reads of a delete statement. */
export function deleteShape(s: DeleteStatement): WriteShape {
  return { filter: s.q, single: s.limit === 1, upsert: false, operation: 'delete', collation: collationOf(s) };
}

/**
 * MongoDB refuses a replacement document with `multi: true`, and constants `c` without a
 * pipeline. Throws `FAILED_TO_PARSE`; `BAD_VALUE` as `isOperatorUpdate`.
 */
export function checkUpdateShape(statement: UpdateStatement): void {
  if (Array.isArray(statement.u)) return;
  if (statement.c !== undefined) {
    throw new TesseraError('FAILED_TO_PARSE', 'Constant values (c) may only be given with an update pipeline.', {
      details: { field: 'c' },
    });
  }
  if (statement.multi && !isOperatorUpdate(statement.u)) {
    throw new TesseraError(
      'FAILED_TO_PARSE',
      'A multi update (multi: true) needs update operators such as $set; a replacement document updates one document.',
      {
        details: { field: 'u' },
      },
    );
  }
}
