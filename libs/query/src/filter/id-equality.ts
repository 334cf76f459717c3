/**
 * The `_id` fast path: a filter that pins `_id` to one value lets a shard read one row by its
 * primary key instead of scanning the key ranges.
 */
import type { Value, ValueObject } from '@tessera/core';
import { isDocument, isOperatorName, isRegex } from '../values.js';
import { validateFilter } from './parse-filter.js';

/**
 * Returns the value a filter requires `_id` to equal (`{_id: v}`, `{_id: {$eq: v}}`, or either
 * inside a top-level `$and`), or `undefined` when `_id` is not pinned to one value. Regexes and
 * arrays never pin (they match by pattern or element).
 * Throws `BAD_VALUE` as `parseFilter` for an invalid filter.
 */
export function idEqualityFromFilter(filter: unknown): Value | undefined {
  return pinnedId(validateFilter(filter, ''));
}

function pinnedId(filter: ValueObject): Value | undefined {
  if (Object.hasOwn(filter, '_id')) {
    const value = equalityOperand(filter['_id'] as Value);
    if (value !== undefined) return value;
  }
  for (const sub of (filter['$and'] as ValueObject[] | undefined) ?? []) {
    const value = pinnedId(sub);
    if (value !== undefined) return value;
  }
  return undefined;
}

function equalityOperand(condition: Value): Value | undefined {
  let value = condition;
  if (isDocument(condition) && Object.keys(condition).some(isOperatorName)) {
    if (!Object.hasOwn(condition, '$eq')) return undefined;
    value = condition['$eq'] as Value;
  }
  return Array.isArray(value) || isRegex(value) ? undefined : value;
}
