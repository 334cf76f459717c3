/**
 * The all-positional `$[]` and filtered-positional `$[<identifier>]` operators of update paths,
 * with the update's `arrayFilters` (MongoDB 3.6+): a path is expanded, against the document
 * before the update, into the concrete paths of the array elements it names. The `$` operator
 * (the element the query matched) is positional.ts.
 */
import { TesseraError, typeBracketOf } from '@tessera/core';
import type { Value, ValueObject } from '@tessera/core';
import { type CompiledFilter, parseFilter } from '../filter/parse-filter.js';
import { display, isDocument } from '../values.js';

const IDENTIFIER = /^[a-z][a-zA-Z0-9]*$/;
const FILTERED = /^\$\[(.*)\]$/;

/** The compiled `arrayFilters` of one update, by identifier, and which of them its paths used. */
export interface ArrayFilters {
  readonly byIdentifier: ReadonlyMap<string, CompiledFilter>;
  readonly used: Set<string>;
}

/**
 * Compiles `arrayFilters`. Each is a filter whose top-level fields all name one identifier (a
 * lowercase letter then letters or digits), `x` or `x.<path>`, as MongoDB requires. Throws
 * `FAILED_TO_PARSE` for a filter that is not a document, names no or several identifiers, an
 * identifier used by two filters, or a bad identifier; `BAD_VALUE` as `parseFilter`.
 */
export function compileArrayFilters(filters: readonly unknown[] | undefined): ArrayFilters {
  const byIdentifier = new Map<string, CompiledFilter>();
  for (const [i, filter] of (filters ?? []).entries()) {
    if (!isDocument(filter) || Object.keys(filter).length === 0) {
      throw new TesseraError('FAILED_TO_PARSE', `arrayFilters[${i}] must be a non-empty document, got ${display(filter as Value)}.`, {
        details: { field: `arrayFilters.${i}` },
      });
    }
    const identifiers = new Set(Object.keys(filter).map((field) => field.split('.')[0]!));
    const [identifier] = identifiers;
    if (identifiers.size !== 1 || identifier === undefined) {
      throw new TesseraError(
        'FAILED_TO_PARSE',
        `Error parsing array filter: expected a single top-level field name, found '${[...identifiers].join("' and '")}'.`,
        {
          details: { field: `arrayFilters.${i}` },
        },
      );
    }
    if (!IDENTIFIER.test(identifier)) {
      throw new TesseraError(
        'BAD_VALUE',
        `Error parsing array filter: the top-level field name must be an alphanumeric string beginning with a lowercase letter, found '${identifier}'.`,
        { details: { field: `arrayFilters.${i}` } },
      );
    }
    if (byIdentifier.has(identifier)) {
      throw new TesseraError('FAILED_TO_PARSE', `Found multiple array filters with the same top-level field name ${identifier}.`, {
        details: { field: `arrayFilters.${i}` },
      });
    }
    byIdentifier.set(identifier, parseFilter(filter));
  }
  return { byIdentifier, used: new Set() };
}

/** True when `path` has a `$[]` or `$[<identifier>]` segment. */
export function hasArrayPositional(path: string): boolean {
  return path.split('.').some((segment) => FILTERED.test(segment));
}

/**
 * The concrete paths `path` names in `document`: each `$[]` becomes every index of the array
 * there, each `$[x]` the indexes of the elements its filter matches (tested as `{ x: element }`).
 * Throws `BAD_VALUE` when a positional segment is not over an array ("must exist in the document
 * in order to apply array updates") or names an identifier with no filter.
 */
export function expandArrayPositional(document: ValueObject, path: string, operator: string, filters: ArrayFilters): string[] {
  const out: string[] = [];
  const walk = (value: Value | undefined, segments: readonly string[], prefix: readonly string[]): void => {
    const [head, ...rest] = segments;
    if (head === undefined) {
      out.push(prefix.join('.'));
      return;
    }
    const positional = FILTERED.exec(head);
    if (positional === null) {
      walk(childOf(value, head), rest, [...prefix, head]);
      return;
    }
    const identifier = positional[1]!;
    const filter = identifier === '' ? undefined : filters.byIdentifier.get(identifier);
    if (identifier !== '' && filter === undefined) {
      throw new TesseraError('BAD_VALUE', `No array filter found for identifier '${identifier}' in path '${path}'.`, {
        details: { path, operator },
      });
    }
    if (identifier !== '') filters.used.add(identifier);
    if (!Array.isArray(value)) {
      throw new TesseraError(
        'BAD_VALUE',
        `The path '${prefix.join('.')}' must exist in the document in order to apply array updates (${operator} on '${path}').`,
        { details: { path, operator } },
      );
    }
    (value as Value[]).forEach((element, index) => {
      if (filter === undefined || filter.matches({ [identifier]: element })) walk(element, rest, [...prefix, String(index)]);
    });
  };
  walk(document, path.split('.'), []);
  return out;
}

/** Throws `FAILED_TO_PARSE` for an array filter no path of the update used, as MongoDB does. */
export function checkArrayFiltersUsed(filters: ArrayFilters): void {
  for (const identifier of filters.byIdentifier.keys()) {
    if (!filters.used.has(identifier)) {
      throw new TesseraError('FAILED_TO_PARSE', `The array filter for identifier '${identifier}' was not used in the update.`, {
        details: { field: 'arrayFilters' },
      });
    }
  }
}

function childOf(value: Value | undefined, segment: string): Value | undefined {
  if (Array.isArray(value)) return /^\d+$/.test(segment) ? (value as Value[])[Number(segment)] : undefined;
  if (value !== undefined && value !== null && typeof value === 'object' && typeBracketOf(value) === 'object')
    return (value as ValueObject)[segment];
  return undefined;
}
