/**
 * Projections: inclusion (`{a: 1, 'b.c': 1}`) or exclusion (`{a: 0}`), never both except that
 * `_id`, included by default, may be excluded from an inclusion. Inclusion keeps the
 * document's field order. Projection operators (`$slice`, `$elemMatch`, `$meta`, `a.$`) are
 * not supported.
 */
import { TesseraError } from '@tessera/core';
import type { Value, ValueObject } from '@tessera/core';
import { display, isDocument, typeNameOf } from '../values.js';
import { checkPathConflicts } from '../update/update-paths.js';

/** Projects one document. */
export type Projector = (document: ValueObject) => ValueObject;

interface Tree {
  [segment: string]: Tree | true;
}

function bad(message: string, field: string): TesseraError {
  return new TesseraError('BAD_VALUE', message, { details: { field } });
}

/**
 * Validates a projection and returns the function applying it; an empty or absent projection
 * returns documents unchanged.
 * Throws `BAD_VALUE` naming the field for mixing inclusion and exclusion ("Cannot do exclusion
 * on field b in inclusion projection"), overlapping paths, a value that is not a number or
 * boolean, or a projection operator.
 */
export function compileProjection(spec: unknown): Projector {
  if (spec === undefined || spec === null) return (document) => document;
  if (!isDocument(spec)) throw new TesseraError('BAD_VALUE', `A projection must be a document, got ${display(spec)}.`);
  let includeId = true;
  const included: string[] = [];
  const excluded: string[] = [];
  for (const [field, value] of Object.entries(spec)) {
    if (field.split('.').some((s) => s === '' || s.startsWith('$')))
      throw bad(`The projection field '${field}' is not supported (positional and $-prefixed paths are not).`, field);
    const type = typeNameOf(value);
    if (type !== 'number' && type !== 'bool')
      throw bad(`The projection of '${field}' must be 1, 0, true or false (operators are not supported), got ${display(value)}.`, field);
    const include = type === 'bool' ? value === true : Number(value as number) !== 0;
    if (field === '_id') includeId = include;
    else if (include) {
      if (excluded.length > 0) throw bad(`Cannot do inclusion on field ${field} in exclusion projection.`, field);
      included.push(field);
    } else {
      if (included.length > 0) throw bad(`Cannot do exclusion on field ${field} in inclusion projection.`, field);
      excluded.push(field);
    }
  }
  try {
    checkPathConflicts([...included, ...excluded, ...(Object.hasOwn(spec, '_id') ? ['_id'] : [])]);
  } catch (error) {
    const path = String((error as TesseraError).details?.['path'] ?? '');
    throw bad(`Path collision at '${path}' in the projection.`, path);
  }
  if (included.length > 0) {
    const tree = buildTree(includeId ? [...included, '_id'] : included);
    return (document) => include(document, tree);
  }
  const tree = buildTree(includeId ? excluded : [...excluded, '_id']);
  return (document) => exclude(document, tree);
}

function buildTree(paths: readonly string[]): Tree {
  const root: Tree = {};
  for (const path of paths) {
    const segments = path.split('.');
    let node = root;
    segments.forEach((segment, i) => {
      if (i === segments.length - 1) node[segment] = true;
      else node = (node[segment] ??= {}) as Tree;
    });
  }
  return root;
}

function include(document: ValueObject, tree: Tree): ValueObject {
  const out: Record<string, Value> = {};
  for (const [field, value] of Object.entries(document)) {
    const node = tree[field];
    if (node === undefined) continue;
    if (node === true) out[field] = value;
    else if (isDocument(value)) out[field] = include(value, node);
    else if (Array.isArray(value)) out[field] = includeInArray(value as Value[], node);
  }
  return out;
}

function includeInArray(items: readonly Value[], tree: Tree): Value[] {
  const out: Value[] = [];
  for (const item of items) {
    if (isDocument(item)) out.push(include(item, tree));
    else if (Array.isArray(item)) out.push(includeInArray(item as Value[], tree));
  }
  return out;
}

function exclude(document: ValueObject, tree: Tree): ValueObject {
  const out: Record<string, Value> = {};
  for (const [field, value] of Object.entries(document)) {
    const node = tree[field];
    if (node === true) continue;
    out[field] = node === undefined ? value : excludeIn(value, node);
  }
  return out;
}

function excludeIn(value: Value, tree: Tree): Value {
  if (isDocument(value)) return exclude(value, tree);
  if (Array.isArray(value)) return (value as Value[]).map((item) => excludeIn(item, tree));
  return value;
}
