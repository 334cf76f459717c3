/**
 * The document an upsert inserts when nothing matches: the filter's equality fields, then the
 * update applied with `$setOnInsert` in force (MongoDB's rule). A replacement update keeps
 * only the filter's `_id`.
 */
import type { Value, ValueObject } from '@tessera/core';
import { validateFilter } from '../filter/parse-filter.js';
import { isDocument, isOperatorName, isRegex } from '../values.js';
import { applyUpdate, isOperatorUpdate } from './apply-update.js';
import { parseUpdatePath, setPath } from './update-paths.js';
import type { MutableDocument } from './update-paths.js';

/** Options of `upsertDocument`. */
export interface UpsertOptions {
  readonly now: Date;
  readonly arrayFilters?: readonly unknown[];
  readonly variables?: ValueObject;
}

/**
 * Returns the document to insert for an upsert of `update` with `filter`; it has no `_id` when
 * neither the filter nor the update gives one (`prepareInsert` then generates it). Throws as
 * `parseFilter` and `applyUpdate` (a `$` path among them: no query matched the new document).
 */
export function upsertDocument(filter: unknown, update: unknown, options: UpsertOptions): ValueObject {
  const { now, variables } = options;
  const base = equalityFields(validateFilter(filter, ''));
  // A pipeline runs on the filter's equality fields, as MongoDB builds an upserted document.
  if (Array.isArray(update)) return applyUpdate(base, update, { now, ...(variables !== undefined ? { variables } : {}) }).doc;
  if (!isOperatorUpdate(update)) {
    const replacement = update as ValueObject;
    if (Object.hasOwn(replacement, '_id') || !Object.hasOwn(base, '_id')) return applyUpdate({}, replacement, { now }).doc;
    return applyUpdate({}, { _id: base['_id'] as Value, ...replacement }, { now }).doc;
  }
  const arrayFilters = options.arrayFilters;
  return applyUpdate(base, update, { now, isUpsertInsert: true, ...(arrayFilters !== undefined ? { arrayFilters } : {}) }).doc;
}

/** The fields a filter pins by equality (`{a: 1}`, `{a: {$eq: 1}}`, inside `$and`), as a document, `_id` first. */
function equalityFields(filter: ValueObject): ValueObject {
  const out: MutableDocument = {};
  collect(filter, out);
  if (!Object.hasOwn(out, '_id')) return out;
  const { _id, ...rest } = out;
  return { _id: _id as Value, ...rest };
}

function collect(filter: ValueObject, out: MutableDocument): void {
  for (const [key, condition] of Object.entries(filter)) {
    if (key === '$and') {
      for (const sub of condition as ValueObject[]) collect(sub, out);
      continue;
    }
    if (isOperatorName(key)) continue;
    let value: Value | undefined = condition;
    if (isDocument(condition) && Object.keys(condition).some(isOperatorName)) value = condition['$eq'];
    if (value === undefined || isRegex(value)) continue;
    try {
      setPath(out, parseUpdatePath(key, 'upsert'), value);
    } catch {
      // Two equalities that cannot both become fields ({a: 1, 'a.b': 2}): the update decides.
    }
  }
}
