/**
 * Dotted paths for updates: reading, creating and removing fields of a working copy of a
 * document, and MongoDB's rule that no two paths of one update may overlap.
 */
import { TesseraError } from '@tessera/core';
import type { Value, ValueObject } from '@tessera/core';
import { display, isDocument } from '../values.js';

/** A document being updated: a deep copy of the original's arrays and embedded documents. */
export type MutableDocument = Record<string, Value>;
type Container = Record<string, Value> | Value[];

/** Deep-copies arrays and embedded documents; other values are immutable and shared. Throws nothing. */
export function cloneValue<T extends Value>(value: T): T {
  if (Array.isArray(value)) return (value as Value[]).map(cloneValue) as unknown as T;
  if (isDocument(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, cloneValue(v)])) as unknown as T;
  return value;
}

/**
 * Splits and checks an update path. Throws `BAD_VALUE` naming the path and operator for an
 * empty segment, a positional segment left in it (`$`, `$[]` and `$[id]` are resolved before,
 * see positional.ts and array-filters.ts, except in `$rename`, which MongoDB refuses them) or
 * another `$`-prefixed segment (not valid for storage).
 */
export function parseUpdatePath(path: string, operator: string): string[] {
  const segments = path.split('.');
  for (const segment of segments) {
    if (segment === '')
      throw new TesseraError('BAD_VALUE', `The update path '${path}' in ${operator} contains an empty field name.`, {
        details: { path, operator },
      });
    if (segment === '$' || segment.startsWith('$[')) {
      throw new TesseraError('BAD_VALUE', `The field '${path}' of ${operator} may not be dynamic: it cannot hold a positional segment.`, {
        details: { path, operator },
      });
    }
    if (segment.startsWith('$')) {
      throw new TesseraError(
        'BAD_VALUE',
        `The dollar ($) prefixed field '${segment}' in '${path}' (${operator}) is not valid for storage.`,
        { details: { path, operator } },
      );
    }
  }
  return segments;
}

/**
 * Refuses two paths of one update where one equals or contains the other, as MongoDB does.
 * Throws `BAD_VALUE` "Updating the path 'a.b' would create a conflict at 'a'".
 */
export function checkPathConflicts(paths: readonly string[]): void {
  const sorted = [...paths].sort();
  for (let i = 1; i < sorted.length; i++) {
    const previous = sorted[i - 1] as string;
    const current = sorted[i] as string;
    if (current === previous || current.startsWith(`${previous}.`)) {
      throw new TesseraError('BAD_VALUE', `Updating the path '${current}' would create a conflict at '${previous}'.`, {
        details: { path: current, conflict: previous },
      });
    }
  }
}

function child(container: Container, segment: string): Value | undefined {
  if (Array.isArray(container)) return /^\d+$/.test(segment) ? container[Number(segment)] : undefined;
  return Object.hasOwn(container, segment) ? container[segment] : undefined;
}

function isContainer(value: Value | undefined): value is Container {
  return Array.isArray(value) || isDocument(value);
}

/** Returns the value at `segments`, or `undefined` when missing (or crossing a non-container). Throws nothing. */
export function getPath(document: MutableDocument, segments: readonly string[]): Value | undefined {
  let current: Value | undefined = document;
  for (const segment of segments) {
    if (!isContainer(current)) return undefined;
    current = child(current, segment);
  }
  return current;
}

/**
 * Sets the value at `segments`, creating embedded documents for missing fields and padding
 * arrays with null for an index beyond their end. Throws `BAD_VALUE` naming the path when a
 * field along it is neither a document nor an array, or an array is met with a non-numeric segment.
 */
export function setPath(document: MutableDocument, segments: readonly string[], value: Value): void {
  let current: Container = document;
  segments.forEach((segment, i) => {
    const last = i === segments.length - 1;
    if (Array.isArray(current)) {
      if (!/^\d+$/.test(segment)) throw notViable(segments, segment, current);
      const index = Number(segment);
      while (current.length < index) current.push(null);
      if (last) current[index] = value;
      else current = descend(current, index, segments, i);
    } else if (last) {
      current[segment] = value;
    } else {
      current = descend(current, segment, segments, i);
    }
  });
}

function descend(container: Container, key: string | number, segments: readonly string[], i: number): Container {
  const record = container as Record<string | number, Value>;
  const next = record[key];
  if (next === undefined) {
    const created: MutableDocument = {};
    record[key] = created;
    return created;
  }
  if (!isContainer(next)) throw notViable(segments, segments[i + 1] as string, next);
  return next;
}

function notViable(segments: readonly string[], segment: string, element: Value): TesseraError {
  const path = segments.join('.');
  return new TesseraError('BAD_VALUE', `Cannot create field '${segment}' of '${path}' in element ${display(element)}.`, {
    details: { path },
  });
}

/** Removes the field at `segments` (an array element becomes null, as MongoDB's `$unset`). Returns whether something was removed. Throws nothing. */
export function unsetPath(document: MutableDocument, segments: readonly string[]): boolean {
  const parent = getPath(document, segments.slice(0, -1));
  const last = segments[segments.length - 1] as string;
  if (!isContainer(parent) || child(parent, last) === undefined) return false;
  if (Array.isArray(parent)) parent[Number(last)] = null;
  else delete (parent as Record<string, Value>)[last];
  return true;
}

/** Returns the `_id` of a document for messages, or `{}` when it has none. Throws nothing. */
export function describeDocument(document: ValueObject): string {
  return Object.hasOwn(document, '_id') ? `{_id: ${display(document['_id'])}}` : '{}';
}
