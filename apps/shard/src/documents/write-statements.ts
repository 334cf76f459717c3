/**
 * The statements of the shard's write commands, decoded from the wire: Extended JSON becomes
 * values, a collation document becomes a checked `Collation`, `let` becomes the variables every
 * statement of the command reads.
 */
import type { z } from 'zod';
import { type Collation, type ValueObject, fromExtendedJsonObject, parseCollation } from '@tessera/core';
import type { deleteCommandSchema, findAndModifyCommandSchema, updateCommandSchema } from '@tessera/protocol';

/** How a statement's filter compares strings, and the variables its `$expr` reads (`let`). */
export interface StatementQueryOptions {
  readonly collation?: Collation;
  readonly variables?: ValueObject;
}

export interface UpdateStatement extends StatementQueryOptions {
  q: ValueObject;
  u: unknown;
  multi: boolean;
  upsert: boolean;
  /** With `upsert`: when nothing matches, insert the `new` variable as it is. */
  upsertSupplied?: boolean;
  /** For `$[<identifier>]` paths of `u`. */
  arrayFilters?: readonly ValueObject[];
}

export interface DeleteStatement extends StatementQueryOptions {
  q: ValueObject;
  limit: 0 | 1;
}

export interface FindAndModifyRequest extends StatementQueryOptions {
  query: ValueObject;
  sort?: ValueObject;
  update?: unknown;
  /** For `$[<identifier>]` paths of `update`. */
  arrayFilters?: readonly ValueObject[];
  remove: boolean;
  new: boolean;
  upsert: boolean;
  fields?: ValueObject;
}

/** Parses a filter or update received as Extended JSON. */
export function fromWire(value: unknown): ValueObject {
  return fromExtendedJsonObject(value) as ValueObject;
}

/** A collation received as Extended JSON, checked; undefined for none or `simple`. Throws as `parseCollation`. */
export function collationFromWire(collation: Record<string, unknown> | undefined): Collation | undefined {
  return collation === undefined ? undefined : parseCollation(fromWire(collation));
}

/** The command's statements; a statement's variables are the command's `let` and its own constants `c` over them. */
export function updateStatementsOf(command: z.output<typeof updateCommandSchema>): UpdateStatement[] {
  const shared = variablesOf(command.let);
  return command.updates.map((u) => {
    const variables = u.c === undefined ? shared : { ...shared, ...fromWire(u.c) };
    return {
      q: fromWire(u.q),
      u: updateFromWire(u.u),
      multi: u.multi,
      upsert: u.upsert,
      ...(u.upsertSupplied === true ? { upsertSupplied: true } : {}),
      ...(u.arrayFilters !== undefined ? { arrayFilters: u.arrayFilters.map(fromWire) } : {}),
      ...queryOptions(u.collation, variables),
    };
  });
}

export function deleteStatementsOf(command: z.output<typeof deleteCommandSchema>): DeleteStatement[] {
  const variables = variablesOf(command.let);
  return command.deletes.map((d) => ({ q: fromWire(d.q), limit: d.limit, ...queryOptions(d.collation, variables) }));
}

export function findAndModifyRequestOf(command: z.output<typeof findAndModifyCommandSchema>): FindAndModifyRequest {
  return {
    query: fromWire(command.query),
    ...(command.sort ? { sort: fromWire(command.sort) } : {}),
    ...(command.update !== undefined ? { update: updateFromWire(command.update) } : {}),
    ...(command.arrayFilters !== undefined ? { arrayFilters: command.arrayFilters.map(fromWire) } : {}),
    ...(command.fields ? { fields: fromWire(command.fields) } : {}),
    remove: command.remove,
    new: command.new,
    upsert: command.upsert,
    ...queryOptions(command.collation, variablesOf(command.let)),
  };
}

function updateFromWire(update: unknown): unknown {
  return Array.isArray(update) ? update.map((stage) => fromWire(stage)) : fromWire(update);
}

function variablesOf(letSpec: Record<string, unknown> | undefined): ValueObject | undefined {
  return letSpec === undefined ? undefined : fromWire(letSpec);
}

function queryOptions(collation: Record<string, unknown> | undefined, variables: ValueObject | undefined): StatementQueryOptions {
  const parsed = collationFromWire(collation);
  return { ...(parsed !== undefined ? { collation: parsed } : {}), ...(variables !== undefined ? { variables } : {}) };
}
