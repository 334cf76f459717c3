/**
 * Sorts in MongoDB's order (reference "Sorting": each shard sorts, the router merge-sorts with
 * the same comparator). Values compare with core `compareValues`, across types. A missing
 * field sorts as null; an array sorts by its smallest element ascending and its largest
 * descending; an empty array sorts below null.
 */
import { MinKey } from 'bson';
import { compareValues, numericValueOf, stringComparatorFor, TesseraError, typeBracketOf } from '@tessera/core';
import type { Collation, StringComparator, Value, ValueObject } from '@tessera/core';
import { display, isDocument, valuesAtPath } from '../values.js';

/** One field of a sort: a dotted path and a direction. */
export interface SortField {
  readonly path: string;
  readonly direction: 1 | -1;
}

/** Compares two documents: negative, zero or positive. */
export type DocumentComparator = (a: ValueObject, b: ValueObject) => number;

/**
 * Validates a sort specification such as `{ age: -1, name: 1 }`.
 * Throws `BAD_VALUE` naming the field when a direction is not 1 or -1 (`$meta` is not
 * supported), a path is empty or has a `$`-prefixed segment, or the spec is not a document.
 */
export function parseSort(spec: unknown): SortField[] {
  if (!isDocument(spec)) throw new TesseraError('BAD_VALUE', `A sort must be a document, got ${display(spec)}.`);
  return Object.entries(spec).map(([path, direction]) => {
    if (path.split('.').some((s) => s === '' || s.startsWith('$'))) {
      throw new TesseraError('BAD_VALUE', `Invalid sort field '${path}'.`, { details: { field: path } });
    }
    const n = toNumber(direction);
    if (n !== 1 && n !== -1) {
      throw new TesseraError(
        'BAD_VALUE',
        `The sort order of '${path}' must be 1 (ascending) or -1 (descending), got ${display(direction)}.`,
        {
          details: { field: path },
        },
      );
    }
    return { path, direction: n };
  });
}

function isNumberObject(value: Value): boolean {
  try {
    return typeBracketOf(value) === 'number';
  } catch {
    return false;
  }
}

function toNumber(value: Value): number {
  return isNumberObject(value) ? Number(numericValueOf(value)) : NaN;
}

/** Returns the value a document sorts by on one field and direction (see the module comment). Throws nothing for core values. */
export function sortKeyOf(document: ValueObject, path: string, direction: 1 | -1, strings?: StringComparator): Value {
  const reached = valuesAtPath(document, path);
  if (reached.length === 0) return null;
  let best: Value | undefined;
  let sawEmptyArray = false;
  for (const value of reached) {
    const candidates = Array.isArray(value) ? (value as Value[]) : [value];
    if (candidates.length === 0) sawEmptyArray = true;
    for (const candidate of candidates) {
      if (best === undefined || compareValues(candidate, best, strings) * direction < 0) best = candidate;
    }
  }
  return best ?? (sawEmptyArray ? new MinKey() : null);
}

/** Returns a comparator for a sort specification, strings ordered by `collation` when given. Throws `BAD_VALUE` as `parseSort`. */
export function compileSort(spec: unknown, collation?: Collation): DocumentComparator {
  const fields = parseSort(spec);
  const strings = stringComparatorFor(collation);
  return (a, b) => {
    for (const { path, direction } of fields) {
      const c = compareValues(sortKeyOf(a, path, direction, strings), sortKeyOf(b, path, direction, strings), strings) * direction;
      if (c !== 0) return c;
    }
    return 0;
  };
}
