/**
 * The positional `$` operator of update paths (`{ $set: { 'grades.$.score': 90 } }`) and of
 * find projections (`{ 'grades.$': 1 }`): the element of the array before the `$` that the
 * query matched. MongoDB records the
 * position while matching; here the query's conditions on that array are matched again, one
 * element at a time, against the document before the update:
 *
 * - a condition on the array or below it (`grades`, `grades.score`, inside `$and`) matches an
 *   element when it matches a copy of the document whose array holds that element alone;
 * - the position is the first element every such condition matches; when none matches them
 *   all, the first element the last condition matches (MongoDB reports the position of the
 *   last array condition it evaluated, and documents the result as unspecified then);
 * - conditions that match the array only as a whole (`$size`, equality to the whole array) give
 *   no position, as in MongoDB.
 */
import { TesseraError } from '@tessera/core';
import type { Collation, Value, ValueObject } from '@tessera/core';
import { parseFilter } from '../filter/parse-filter.js';
import { isDocument } from '../values.js';
import { getPath } from './update-paths.js';

/** The query of an update or find, for its `$` paths: the filter and how it compares. */
export interface UpdateQuery {
  readonly filter: ValueObject;
  readonly collation?: Collation;
}

/** True when a segment of `path` is the positional `$`. */
export function hasPositional(path: string): boolean {
  return path.split('.').includes('$');
}

/**
 * `path` with its `$` replaced by the index the query matched in `document`. Throws `BAD_VALUE`
 * with MongoDB's messages for a `$` first in the path, more than one `$`, and when the query
 * matched no element of an array there (no query, as for an upsert's inserted document; no
 * condition on that array; or no array at that path).
 */
export function resolvePositional(document: ValueObject, path: string, operator: string, query: UpdateQuery | undefined): string {
  const segments = path.split('.');
  const at = segments.indexOf('$');
  if (at === 0) throw positionalError(`Cannot have positional (i.e. '$') element in the first position in path '${path}'.`, path, operator);
  if (segments.lastIndexOf('$') !== at)
    throw positionalError(`Too many positional (i.e. '$') elements found in path '${path}'.`, path, operator);
  const arrayPath = segments.slice(0, at);
  const index = query === undefined ? undefined : matchedPosition(document, arrayPath.join('.'), query);
  if (index === undefined) throw positionalError('The positional operator did not find the match needed from the query.', path, operator);
  return [...arrayPath, String(index), ...segments.slice(at + 1)].join('.');
}

/** The index in the array at `arrayPath` of `document` that `query` matched (see the module comment), or undefined. Throws nothing beyond `parseFilter`'s. */
export function matchedPosition(document: ValueObject, arrayPath: string, query: UpdateQuery): number | undefined {
  const array = getPath(document, arrayPath.split('.'));
  return Array.isArray(array) ? matchedIndex(array, arrayPath, query) : undefined;
}

function matchedIndex(array: readonly Value[], arrayPath: string, query: UpdateQuery): number | undefined {
  const conditions = conditionsOn(query.filter, arrayPath);
  const matched = conditions.map((condition) => {
    const compiled = parseFilter(condition, query.collation);
    return array.map((element) => compiled.matches({ e: [element] }));
  });
  const elementMatching = matched.filter((hits) => hits.includes(true));
  if (elementMatching.length === 0) return undefined;
  const all = array.findIndex((_, i) => elementMatching.every((hits) => hits[i]));
  return all >= 0 ? all : elementMatching[elementMatching.length - 1]!.indexOf(true);
}

/** The filter's conditions on `arrayPath` or below it, each rewritten onto the field `e`. */
function conditionsOn(filter: ValueObject, arrayPath: string): ValueObject[] {
  const out: ValueObject[] = [];
  for (const [key, condition] of Object.entries(filter)) {
    if (key === '$and' && Array.isArray(condition)) {
      for (const sub of condition) if (isDocument(sub)) out.push(...conditionsOn(sub, arrayPath));
    } else if (key === arrayPath) {
      out.push({ e: condition });
    } else if (key.startsWith(`${arrayPath}.`)) {
      out.push({ [`e.${key.slice(arrayPath.length + 1)}`]: condition });
    }
  }
  return out;
}

function positionalError(message: string, path: string, operator: string): TesseraError {
  return new TesseraError('BAD_VALUE', message, { details: { path, operator } });
}
