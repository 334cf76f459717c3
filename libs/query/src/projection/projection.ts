/**
 * Find projections, as MongoDB 4.4+ reads them:
 *
 * - inclusion (`{a: 1, 'b.c': 1}`) or exclusion (`{a: 0}`), never both except that `_id`,
 *   included by default, may be excluded from an inclusion; inclusion keeps the document's
 *   field order;
 * - `{arr: {$slice: n}}` or `{$slice: [skip, n]}`: the array cut, in either mode (alone it keeps
 *   every other field);
 * - `{arr: {$elemMatch: query}}` (a top-level field): the first element matching, or no field;
 * - `{'arr.$': 1}`: the first element the find's query matched (positional.ts);
 * - any other value (a string, `{$add: ...}`, `$$name`): a computed field, an aggregation
 *   expression over the document reading the find's `let`, added after the included fields.
 *
 * The last three are inclusions.
 */
import { TesseraError } from '@tessera/core';
import type { Collation, Value, ValueObject } from '@tessera/core';
import { evaluateLet, refuseScripts } from '../aggregate/run-pipeline.js';
import { parseFilter } from '../filter/parse-filter.js';
import { display, isDocument, typeNameOf } from '../values.js';
import { type UpdateQuery, matchedPosition } from '../update/positional.js';
import { checkPathConflicts } from '../update/update-paths.js';

/** Projects one document. */
export type Projector = (document: ValueObject) => ValueObject;

/** What a projection's operators read besides the document: the query (for `a.$`) and `let`. */
export interface ProjectionOptions {
  readonly query?: UpdateQuery;
  readonly variables?: ValueObject;
}

/** The options of a find's projection: its filter and collation (for `a.$`) and its `let`. Throws nothing. */
export function projectionOptions(
  filter: ValueObject,
  collation: Collation | undefined,
  variables: ValueObject | undefined,
): ProjectionOptions {
  return { query: { filter, ...(collation !== undefined ? { collation } : {}) }, ...(variables !== undefined ? { variables } : {}) };
}

interface Tree {
  [segment: string]: Tree | true;
}

/** A field whose value the projection computes after including or excluding the others. */
type Step =
  | { readonly kind: 'slice'; readonly path: string; readonly skip: number | undefined; readonly limit: number }
  | { readonly kind: 'elemMatch'; readonly field: string; readonly matches: (element: Value) => boolean }
  | { readonly kind: 'positional'; readonly path: string }
  | { readonly kind: 'computed'; readonly path: string; readonly expression: Value };

function bad(message: string, field: string): TesseraError {
  return new TesseraError('BAD_VALUE', message, { details: { field } });
}

/**
 * Validates a projection and returns the function applying it; an empty or absent projection
 * returns documents unchanged. Throws `BAD_VALUE` naming the field for mixing inclusion and
 * exclusion ("Cannot do exclusion on field b in inclusion projection"), overlapping paths, a
 * malformed `$slice` or `$elemMatch`, a `$` that is not last or not alone, a script operator;
 * the projector throws `BAD_VALUE` when a `$` finds no element the query matched.
 */
export function compileProjection(spec: unknown, options: ProjectionOptions = {}): Projector {
  if (spec === undefined || spec === null) return (document) => document;
  if (!isDocument(spec)) throw new TesseraError('BAD_VALUE', `A projection must be a document, got ${display(spec)}.`);
  refuseScripts(spec, 'projection');
  let includeId = true;
  const included: string[] = [];
  const excluded: string[] = [];
  const steps: Step[] = [];
  const paths: string[] = [];
  for (const [field, value] of Object.entries(spec)) {
    const step = stepOf(field, value as Value, options);
    const path = step === undefined ? field : 'field' in step ? step.field : step.path;
    if (path.split('.').some((s) => s === '' || s.startsWith('$')))
      throw bad(`The projection field '${field}' is not valid: an empty or $-prefixed part, or a '$' that is not last.`, field);
    paths.push(path);
    if (step?.kind === 'slice') {
      steps.push(step);
      continue;
    }
    const include = step !== undefined || (typeNameOf(value) === 'bool' ? value === true : Number(value as number) !== 0);
    if (step !== undefined) steps.push(step);
    if (field === '_id' && step === undefined) includeId = include;
    else if (include) {
      if (excluded.length > 0) throw bad(`Cannot do inclusion on field ${field} in exclusion projection.`, field);
      if (step === undefined || step.kind === 'positional') included.push(path);
    } else {
      if (included.length > 0 || steps.some((s) => s.kind !== 'slice'))
        throw bad(`Cannot do exclusion on field ${field} in inclusion projection.`, field);
      excluded.push(field);
    }
  }
  if (steps.filter((s) => s.kind === 'positional').length > 1)
    throw bad('Cannot specify more than one positional projection per query.', '$');
  try {
    checkPathConflicts(paths);
  } catch (error) {
    const path = String((error as TesseraError).details?.['path'] ?? '');
    throw bad(`Path collision at '${path}' in the projection.`, path);
  }
  const inclusion = included.length > 0 || steps.some((s) => s.kind !== 'slice');
  const sliced = steps.filter((s) => s.kind === 'slice').map((s) => s.path);
  const base: Projector = inclusion
    ? (
        (tree) => (document) =>
          include(document, tree)
      )(buildTree([...included, ...sliced, ...(includeId ? ['_id'] : [])]))
    : excluded.length > 0 || !includeId
      ? (
          (tree) => (document) =>
            exclude(document, tree)
        )(buildTree(includeId ? excluded : [...excluded, '_id']))
      : (document) => ({ ...document });
  if (steps.length === 0) return base;
  // Every computed field of a document in one evaluation, by placeholder names (a field's own
  // name may be a dotted path, which no expression document may hold).
  const computed = steps.flatMap((step, i) => (step.kind === 'computed' ? [[`f${i}`, step] as const] : []));
  const expressions = Object.fromEntries(computed.map(([name, step]) => [name, step.expression]));
  return (document) => {
    const out = base(document) as Record<string, Value>;
    const values = computed.length === 0 ? {} : evaluateLet(document, expressions, options.variables);
    for (const [i, step] of steps.entries()) applyStep(out, document, step, options, values[`f${i}`]);
    return out;
  };
}

/** The step a field's value asks for, or undefined for a plain 1/0/true/false. */
function stepOf(field: string, value: Value, options: ProjectionOptions): Step | undefined {
  if (field.endsWith('.$')) {
    if (!isIncluding(value)) throw bad(`The positional projection '${field}' must be 1 or true.`, field);
    return { kind: 'positional', path: field.slice(0, -2) };
  }
  const type = typeNameOf(value);
  if (type === 'number' || type === 'bool') return undefined;
  if (isDocument(value) && Object.keys(value).length === 1) {
    const [operator] = Object.keys(value);
    const operand = value[operator!];
    if (operator === '$slice' && isSliceOperand(operand)) {
      const [skip, limit] = Array.isArray(operand) ? (operand as number[]) : [undefined, operand as number];
      if (Array.isArray(operand) && limit! <= 0) throw bad(`$slice limit must be positive, got ${limit}.`, field);
      return { kind: 'slice', path: field, skip, limit: limit! };
    }
    if (operator === '$elemMatch') {
      if (field.includes('.')) throw bad(`Cannot use $elemMatch projection on a nested field: '${field}'.`, field);
      if (!isDocument(operand)) throw bad(`$elemMatch needs a query document, got ${display(operand)}.`, field);
      const compiled = parseFilter({ e: { $elemMatch: operand } }, options.query?.collation, options.variables);
      return { kind: 'elemMatch', field, matches: (element) => compiled.matches({ e: [element] }) };
    }
  }
  return { kind: 'computed', path: field, expression: value };
}

function isIncluding(value: Value): boolean {
  return value === true || (typeNameOf(value) === 'number' && Number(value as number) !== 0);
}

function isSliceOperand(operand: Value | undefined): boolean {
  if (Number.isInteger(operand)) return true;
  return Array.isArray(operand) && operand.length === 2 && operand.every((n) => Number.isInteger(n));
}

/** Applies one step to `out`; `computed` is a computed field's value (undefined when it is missing). */
function applyStep(
  out: Record<string, Value>,
  document: ValueObject,
  step: Step,
  options: ProjectionOptions,
  computed: Value | undefined,
): void {
  switch (step.kind) {
    case 'slice': {
      const segments = step.path.split('.');
      const array = valueAt(out, segments);
      if (Array.isArray(array)) setAt(out, segments, sliceOf(array as Value[], step.skip, step.limit));
      return;
    }
    case 'elemMatch': {
      const array = document[step.field];
      const first = Array.isArray(array) ? (array as Value[]).find(step.matches) : undefined;
      if (first !== undefined) out[step.field] = [first];
      else delete out[step.field];
      return;
    }
    case 'positional': {
      const index = options.query === undefined ? undefined : matchedPosition(document, step.path, options.query);
      if (index === undefined)
        throw bad(
          `Executor error during find command: positional operator '${step.path}.$' couldn't find a matching element in the array.`,
          `${step.path}.$`,
        );
      const segments = step.path.split('.');
      setAt(out, segments, [(valueAt(document, segments) as Value[])[index]!]);
      return;
    }
    case 'computed':
      if (computed !== undefined) setAt(out, step.path.split('.'), computed);
  }
}

/** MongoDB's `$slice`: the first `limit` elements (the last `-limit` when negative), after skipping `skip` (from the end when negative). */
function sliceOf(array: readonly Value[], skip: number | undefined, limit: number): Value[] {
  if (skip === undefined) return limit >= 0 ? array.slice(0, limit) : array.slice(Math.max(array.length + limit, 0));
  const start = skip >= 0 ? skip : Math.max(array.length + skip, 0);
  return array.slice(start, start + limit);
}

function valueAt(document: ValueObject, segments: readonly string[]): Value | undefined {
  let current: Value | undefined = document;
  for (const segment of segments) current = isDocument(current) ? current[segment] : undefined;
  return current;
}

/** Sets `segments` in `out`, creating embedded documents along the way (a projection's output is its own copy). */
function setAt(out: Record<string, Value>, segments: readonly string[], value: Value): void {
  let node = out;
  for (const segment of segments.slice(0, -1)) {
    const next = node[segment];
    node = (node[segment] = isDocument(next) ? { ...next } : {}) as Record<string, Value>;
  }
  node[segments[segments.length - 1]!] = value;
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
