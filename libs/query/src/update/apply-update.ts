/**
 * Updates: operator documents (`{$set: ..., $inc: ...}`) and replacement documents, with
 * MongoDB's checks made before anything is applied (unknown modifiers, overlapping paths,
 * operand types), so a bad update never half-applies. Pure: `now` is a parameter.
 */
import { Timestamp } from 'bson';
import { compareShardKeys, compareValues, extractShardKey, TesseraError, toExtendedJson, typeBracketOf } from '@tessera/core';
import type { ShardKeyPattern, Value, ValueObject } from '@tessera/core';
import { parseFilter } from '../filter/parse-filter.js';
import { checkDocumentSize } from '../insert/prepare-insert.js';
import { compileSort } from '../sort/sort.js';
import { display, isDocument, isOperatorName, isRegex, typeNameOf } from '../values.js';
import { applyArithmetic, zeroLike } from './arithmetic.js';
import { checkArrayFiltersUsed, compileArrayFilters, expandArrayPositional, hasArrayPositional } from './array-filters.js';
import { applyUpdatePipeline } from './pipeline-update.js';
import { hasPositional, resolvePositional, type UpdateQuery } from './positional.js';
import { checkPathConflicts, cloneValue, describeDocument, getPath, parseUpdatePath, setPath, unsetPath } from './update-paths.js';
import type { MutableDocument } from './update-paths.js';

/** Options of `applyUpdate`. */
export interface ApplyUpdateOptions {
  /** The time `$currentDate` writes. */
  readonly now: Date;
  /** True when the update runs on the document an upsert inserts: `$setOnInsert` applies. */
  readonly isUpsertInsert?: boolean;
  /** The update's `arrayFilters`, for its `$[<identifier>]` paths (see array-filters.ts). */
  readonly arrayFilters?: readonly unknown[];
  /** The query that matched the document, for its `$` paths (see positional.ts). */
  readonly query?: UpdateQuery;
  /** `let`: the variables a pipeline update's expressions read as `$$name`. */
  readonly variables?: ValueObject;
}

/** The updated document and whether it differs from the original. */
export interface UpdateResult {
  readonly doc: ValueObject;
  readonly modified: boolean;
}

const OPERATORS = new Set([
  '$set',
  '$unset',
  '$inc',
  '$mul',
  '$min',
  '$max',
  '$rename',
  '$push',
  '$addToSet',
  '$pull',
  '$pop',
  '$currentDate',
  '$setOnInsert',
]);

/** True when `update` is an operator update (`$`-prefixed keys), false for a replacement document. Throws `BAD_VALUE` when it mixes both or is not a document. */
export function isOperatorUpdate(update: unknown): boolean {
  if (!isDocument(update)) throw new TesseraError('FAILED_TO_PARSE', `An update must be a document, got ${display(update)}.`);
  const keys = Object.keys(update);
  const operators = keys.filter(isOperatorName);
  if (operators.length > 0 && operators.length !== keys.length) {
    throw new TesseraError(
      'BAD_VALUE',
      `An update cannot mix operators (${operators[0]}) and fields (${keys.find((k) => !isOperatorName(k))}).`,
    );
  }
  return operators.length > 0;
}

/**
 * Applies an update (operators, a replacement, or a pipeline: see `applyUpdatePipeline`) to a
 * document and returns the new document (the original is untouched). Throws `FAILED_TO_PARSE` for an unknown modifier or a modifier whose value is not a document;
 * `BAD_VALUE` for overlapping paths ("would create a conflict at 'a'"), `$inc`/`$mul` with a
 * non-number or on a non-number, `$push`/`$addToSet`/`$pull`/`$pop` on a non-array, bad
 * operands, `$`-prefixed paths, a `$` the query matched no element for; `IMMUTABLE_FIELD` when `_id` would change;
 * `DOCUMENT_TOO_LARGE` when the result exceeds 16 MiB.
 */
export function applyUpdate(document: ValueObject, update: unknown, options: ApplyUpdateOptions): UpdateResult {
  if (options.arrayFilters !== undefined && !(isDocument(update) && isOperatorUpdate(update))) {
    throw new TesseraError(
      'FAILED_TO_PARSE',
      'arrayFilters may only be given with an update of operators, not a replacement or a pipeline.',
      {
        details: { field: 'arrayFilters' },
      },
    );
  }
  const result = Array.isArray(update)
    ? applyUpdatePipeline(document, update, options.now, options.variables)
    : isOperatorUpdate(update)
      ? applyOperators(document, update as ValueObject, options)
      : applyReplacement(document, update as ValueObject);
  if (Object.hasOwn(document, '_id') && (!Object.hasOwn(result, '_id') || !sameValue(document['_id'] as Value, result['_id'] as Value))) {
    throw new TesseraError(
      'IMMUTABLE_FIELD',
      `Performing an update on the path '_id' would modify the immutable field '_id' of ${describeDocument(document)}.`,
      {
        details: { field: '_id' },
      },
    );
  }
  checkDocumentSize(result);
  return { doc: result, modified: !sameValue(document, result) };
}

/**
 * True when the update moves the document to another shard key (MongoDB refuses that outside
 * a transaction). Throws `BAD_VALUE` as `extractShardKey` when `after` has an array or regex
 * in a shard key field.
 */
export function updateChangesShardKey(pattern: ShardKeyPattern, before: ValueObject, after: ValueObject): boolean {
  return compareShardKeys(extractShardKey(pattern, before), extractShardKey(pattern, after)) !== 0;
}

function sameValue(a: Value, b: Value): boolean {
  return toExtendedJson(a) === toExtendedJson(b);
}

function applyReplacement(document: ValueObject, replacement: ValueObject): ValueObject {
  const { _id: id, ...rest } = replacement;
  const keptId = Object.hasOwn(replacement, '_id') ? id : document['_id'];
  return cloneValue(keptId === undefined ? rest : { _id: keptId as Value, ...rest });
}

interface Step {
  readonly operator: string;
  readonly path: string;
  readonly segments: string[];
  readonly operand: Value;
}

function applyOperators(document: ValueObject, update: ValueObject, options: ApplyUpdateOptions): ValueObject {
  const steps: Step[] = [];
  const paths: string[] = [];
  const filters = compileArrayFilters(options.arrayFilters);
  for (const [operator, fields] of Object.entries(update)) {
    if (!OPERATORS.has(operator)) {
      throw new TesseraError('FAILED_TO_PARSE', `Unknown modifier: ${operator}. Expected one of ${[...OPERATORS].join(', ')}.`, {
        details: { operator },
      });
    }
    if (!isDocument(fields)) {
      throw new TesseraError('FAILED_TO_PARSE', `Modifier ${operator} needs a document of fields, got ${display(fields)}.`, {
        details: { operator },
      });
    }
    for (const [given, operand] of Object.entries(fields)) {
      // `$` names the element the query matched, in the document as it was before the update.
      const path = operator !== '$rename' && hasPositional(given) ? resolvePositional(document, given, operator, options.query) : given;
      if (operator !== '$rename' && hasArrayPositional(path)) {
        // `$[]` and `$[x]` name elements of the document as it was before the update.
        for (const concrete of expandArrayPositional(document, path, operator, filters)) {
          steps.push({ operator, path: concrete, segments: parseUpdatePath(concrete, operator), operand });
          paths.push(concrete);
        }
        continue;
      }
      steps.push({ operator, path, segments: parseUpdatePath(path, operator), operand });
      paths.push(path);
      if (operator === '$rename') {
        if (typeof operand !== 'string' || operand === path)
          fail(operator, path, `needs a different target path as a string, got ${display(operand)}`);
        parseUpdatePath(operand as string, operator);
        paths.push(operand as string);
      }
    }
  }
  checkArrayFiltersUsed(filters);
  checkPathConflicts(paths);
  const working = cloneValue(document) as MutableDocument;
  for (const step of steps) applyStep(working, step, options, document);
  return working;
}

function fail(operator: string, path: string, what: string, code: 'BAD_VALUE' | 'TYPE_MISMATCH' = 'BAD_VALUE'): never {
  throw new TesseraError(code, `${operator} on '${path}' ${what}.`, { details: { operator, path } });
}

function isNumber(value: Value | undefined): boolean {
  return value !== undefined && typeNameOf(value) === 'number';
}

function arrayAt(working: MutableDocument, step: Step, original: ValueObject): Value[] | undefined {
  const current = getPath(working, step.segments);
  if (current === undefined) return undefined;
  if (!Array.isArray(current)) {
    fail(
      step.operator,
      step.path,
      `needs an array, but the field is of type ${typeNameOf(current)} in document ${describeDocument(original)}`,
    );
  }
  return current as Value[];
}

/** Applies one field's operator to `working`, in place. `original` is the document before the update, for errors. */
function applyStep(working: MutableDocument, step: Step, options: ApplyUpdateOptions, original: ValueObject): void {
  const { operator, path, segments, operand } = step;
  switch (operator) {
    case '$setOnInsert':
      if (options.isUpsertInsert !== true) return;
      return setPath(working, segments, cloneValue(operand));
    case '$set':
      return setPath(working, segments, cloneValue(operand));
    case '$unset':
      unsetPath(working, segments);
      return;
    case '$inc':
    case '$mul':
      return incrementOrMultiply(working, operator, step, original);
    case '$min':
    case '$max':
      return keepMinOrMax(working, step);
    case '$rename':
      return renameField(working, step);
    case '$currentDate':
      return setPath(working, segments, currentDate(operand, options.now, path));
    case '$push':
    case '$addToSet':
      return setPath(working, segments, appendToArray(operator, arrayAt(working, step, original) ?? [], operand, path));
    case '$pull':
      return pullFromArray(working, step, original);
    case '$pop':
      return popFromArray(working, step, original);
    default:
      throw new TesseraError('FAILED_TO_PARSE', `Unknown modifier: ${operator}.`, { details: { operator } });
  }
}

/** `$inc` or `$mul`: a missing field is set to the operand (`$inc`) or a zero of its type (`$mul`). */
function incrementOrMultiply(
  working: MutableDocument,
  operator: '$inc' | '$mul',
  { path, segments, operand }: Step,
  original: ValueObject,
): void {
  // MongoDB answers TypeMismatch for arithmetic on or with a non-number.
  if (!isNumber(operand)) fail(operator, path, `needs a numeric argument, got ${display(operand)}`, 'TYPE_MISMATCH');
  const current = getPath(working, segments);
  if (current === undefined) return setPath(working, segments, operator === '$inc' ? operand : zeroLike(operand));
  if (!isNumber(current))
    fail(
      operator,
      path,
      `cannot apply to a value of non-numeric type ${typeNameOf(current)} in document ${describeDocument(original)}`,
      'TYPE_MISMATCH',
    );
  return setPath(working, segments, applyArithmetic(operator, current as Value, operand, path));
}

/** `$min` or `$max`: sets the field to the operand when it is missing or the operand is lower (higher). */
function keepMinOrMax(working: MutableDocument, { operator, segments, operand }: Step): void {
  const current = getPath(working, segments);
  const c = current === undefined ? 0 : compareValues(operand, current);
  if (current === undefined || (operator === '$min' ? c < 0 : c > 0)) setPath(working, segments, cloneValue(operand));
}

/** `$rename`: moves the field's value to the operand's path; nothing when the field is missing. */
function renameField(working: MutableDocument, { operator, segments, operand }: Step): void {
  const value = getPath(working, segments);
  if (value === undefined) return;
  unsetPath(working, segments);
  return setPath(working, parseUpdatePath(operand as string, operator), value);
}

/** `$pull`: removes the array's elements that match the operand; nothing when the field is missing. */
function pullFromArray(working: MutableDocument, step: Step, original: ValueObject): void {
  const current = arrayAt(working, step, original);
  if (current === undefined) return;
  const matches = pullPredicate(step.operand);
  return setPath(
    working,
    step.segments,
    current.filter((element) => !matches(element)),
  );
}

/** `$pop`: removes the array's last element (1) or first (-1); nothing when it is missing or empty. */
function popFromArray(working: MutableDocument, step: Step, original: ValueObject): void {
  const { operator, path, segments, operand } = step;
  if (operand !== 1 && operand !== -1) fail(operator, path, `needs 1 or -1, got ${display(operand)}`);
  const current = arrayAt(working, step, original);
  if (current === undefined || current.length === 0) return;
  return setPath(working, segments, operand === 1 ? current.slice(0, -1) : current.slice(1));
}

function currentDate(operand: Value, now: Date, path: string): Value {
  if (operand === true) return new Date(now.getTime());
  if (isDocument(operand) && Object.keys(operand).length === 1) {
    if (operand['$type'] === 'date') return new Date(now.getTime());
    if (operand['$type'] === 'timestamp') return new Timestamp({ t: Math.floor(now.getTime() / 1000), i: 1 });
  }
  return fail('$currentDate', path, `needs true or {$type: "date" | "timestamp"}, got ${display(operand)}`);
}

const PUSH_MODIFIERS = new Set(['$each', '$position', '$slice', '$sort']);

function appendToArray(operator: '$push' | '$addToSet', current: Value[], operand: Value, path: string): Value[] {
  const usesEach = isDocument(operand) && Object.hasOwn(operand, '$each');
  const spec = operand as ValueObject;
  if (usesEach) {
    for (const key of Object.keys(spec)) {
      if (!PUSH_MODIFIERS.has(key) || (operator === '$addToSet' && key !== '$each'))
        fail(operator, path, `does not support the modifier ${key}`);
    }
    if (!Array.isArray(spec['$each'])) fail(operator, path, `needs $each to be an array, got ${display(spec['$each'])}`);
  }
  const items = (usesEach ? (spec['$each'] as Value[]) : [operand]).map(cloneValue);
  if (operator === '$addToSet') {
    const out = [...current];
    for (const item of items) if (!out.some((existing) => compareValues(existing, item) === 0)) out.push(item);
    return out;
  }
  let out = [...current];
  const position = usesEach ? spec['$position'] : undefined;
  if (position !== undefined && !Number.isInteger(position)) fail(operator, path, `needs an integer $position, got ${display(position)}`);
  const at =
    position === undefined
      ? out.length
      : (position as number) < 0
        ? Math.max(0, out.length + (position as number))
        : Math.min(position as number, out.length);
  out.splice(at, 0, ...items);
  if (usesEach && spec['$sort'] !== undefined) out = sortForPush(out, spec['$sort'], path);
  const slice = usesEach ? spec['$slice'] : undefined;
  if (slice !== undefined) {
    if (!Number.isInteger(slice)) fail(operator, path, `needs an integer $slice, got ${display(slice)}`);
    out = (slice as number) >= 0 ? out.slice(0, slice as number) : out.slice(Math.max(0, out.length + (slice as number)));
  }
  return out;
}

function sortForPush(items: Value[], sort: Value, path: string): Value[] {
  if (sort === 1 || sort === -1) return [...items].sort((a, b) => compareValues(a, b) * (sort as number));
  if (!isDocument(sort)) fail('$push', path, `needs $sort to be 1, -1 or a sort document, got ${display(sort)}`);
  const compare = compileSort(sort);
  const asDocument = (v: Value): ValueObject => (isDocument(v) ? v : {});
  return [...items].sort((a, b) => compare(asDocument(a), asDocument(b)));
}

/** `$pull` removes elements equal to a value, matching a regex, or matching a condition (operators, or a document query). */
function pullPredicate(operand: Value): (element: Value) => boolean {
  if (isRegex(operand)) {
    const filter = parseFilter({ v: operand });
    return (element) => filter.matches({ v: element });
  }
  if (isDocument(operand)) {
    if (Object.keys(operand).some(isOperatorName)) {
      const filter = parseFilter({ v: operand });
      return (element) => filter.matches({ v: element });
    }
    const filter = parseFilter(operand);
    return (element) => isDocument(element) && filter.matches(element);
  }
  typeBracketOf(operand);
  return (element) => compareValues(element, operand) === 0;
}
