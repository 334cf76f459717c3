/**
 * Filters: validation, then matching through mingo. Validation walks the whole filter first so
 * that a bad filter is refused with one clear error before any document is read; it also
 * normalises what mingo cannot take as is (BSON regexes become `RegExp`, `$type` numbers become
 * names, `$size` numbers become JS numbers). Matching runs mingo's `Query` in a context where
 * the comparison operators are ours (see `query-operators.ts`).
 */
import { Long } from 'bson';
import { Context } from 'mingo';
import * as expressionOperators from 'mingo/operators/expression';
import { collatedComparisons } from './collated-expressions.js';
import * as mingoQueryOperators from 'mingo/operators/query';
import { Query } from 'mingo/query';
import { numericValueOf, stringComparatorFor, TesseraError, typeBracketOf } from '@tessera/core';
import type { Collation, StringComparator, Value, ValueObject } from '@tessera/core';
import { asRegExp, display, isDocument, isOperatorName, isRegex, toRegExp } from '../values.js';
import { buildFieldOperators } from './query-operators.js';

/** A validated filter, ready to test documents. */
export interface CompiledFilter {
  /** The normalised filter (regexes as `RegExp`, `$type` as names). */
  readonly filter: ValueObject;
  /** True when `document` matches the filter. Throws nothing for documents of core `Value`s. */
  matches(document: ValueObject): boolean;
}

const LOGICAL_OPERATORS = new Set(['$and', '$or', '$nor']);
const UNSUPPORTED_TOP_LEVEL = new Set(['$where', '$function', '$text', '$jsonSchema', '$sampleRate']);
const UNSUPPORTED_FIELD_OPERATORS = new Set([
  '$mod',
  '$bitsAllSet',
  '$bitsAllClear',
  '$bitsAnySet',
  '$bitsAnyClear',
  '$geoWithin',
  '$geoIntersects',
  '$near',
  '$nearSphere',
  '$where',
  '$expr',
  '$function',
  '$jsonSchema',
  '$text',
]);
const VALUE_OPERATORS = new Set(['$eq', '$ne', '$gt', '$gte', '$lt', '$lte']);

/** MongoDB's `$type` aliases by number, and the names `$type` accepts. */
const BSON_TYPE_NUMBERS: Readonly<Record<number, string>> = {
  1: 'double',
  2: 'string',
  3: 'object',
  4: 'array',
  5: 'binData',
  7: 'objectId',
  8: 'bool',
  9: 'date',
  10: 'null',
  11: 'regex',
  16: 'int',
  17: 'timestamp',
  18: 'long',
  19: 'decimal',
  [-1]: 'minKey',
  127: 'maxKey',
};
const BSON_TYPE_NAMES = new Set([...Object.values(BSON_TYPE_NUMBERS), 'number']);

function badValue(message: string, details: Record<string, unknown>): TesseraError {
  return new TesseraError('BAD_VALUE', message, { details });
}

/**
 * Validates a filter and returns a compiled matcher.
 * Throws `BAD_VALUE` naming the operator and the path for an unknown operator anywhere, an
 * unsupported one (`$where`, `$function`, `$expr`, `$text`, `$mod`, geo and bit operators), a
 * malformed operand (`$in` without an array, `$and` with an empty array, ...), or a field
 * document mixing operators and fields. Under a `collation`, strings compare as it says
 * (`$regex` excepted, as in MongoDB). `$expr` reads `variables` (a command's `let`) as `$$name`.
 */
export function parseFilter(filter: unknown, collation?: Collation, variables?: ValueObject): CompiledFilter {
  const normalized = validateFilter(filter, '');
  const context = contextFor(stringComparatorFor(collation));
  const query = new Query(withoutBigInts(normalized) as ValueObject, {
    context,
    scriptEnabled: false,
    ...(variables !== undefined ? { variables: withoutBigInts(variables) as ValueObject } : {}),
  });
  return { filter: normalized, matches: (document) => testExpression(query, document) };
}

/** `query.test`, a failing `$expr` (an expression's bad operand or unknown operator) answered as MongoDB's BadValue. */
function testExpression(query: Query, document: ValueObject): boolean {
  try {
    return query.test(document);
  } catch (error) {
    if (error instanceof TesseraError) throw error;
    throw badValue(`$expr could not be evaluated: ${(error as Error).message}`, { operator: '$expr' });
  }
}

/**
 * mingo formats some assertion messages with `JSON.stringify` of the whole filter, which
 * throws on a `bigint`; int64 operands are handed to it as `Long`, which compares equal.
 */
function withoutBigInts(value: Value): Value {
  if (typeof value === 'bigint') return Long.fromBigInt(value);
  if (Array.isArray(value)) return (value as Value[]).map(withoutBigInts);
  if (isDocument(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, withoutBigInts(v)]));
  return value;
}

/**
 * Normalised filters this module made. Targeting, pushdown and matching all start by validating
 * the filter they get; one they are handed back is returned as it is, not walked again.
 */
const normalizedFilters = new WeakSet<ValueObject>();

/**
 * Validates a filter (see `parseFilter`) and returns its normalised form (a filter it returned
 * before comes back as it is). Throws as `parseFilter`.
 */
export function validateFilter(filter: unknown, where: string): ValueObject {
  if (typeof filter === 'object' && filter !== null && normalizedFilters.has(filter as ValueObject)) return filter as ValueObject;
  const normalized = normalizeFilter(filter, where);
  normalizedFilters.add(normalized);
  return normalized;
}

function normalizeFilter(filter: unknown, where: string): ValueObject {
  if (!isDocument(filter)) {
    throw badValue(`A filter must be a document${where ? ` at '${where}'` : ''}, got ${display(filter)}.`, { path: where });
  }
  const out: Record<string, Value> = {};
  for (const [key, value] of Object.entries(filter)) {
    const at = where ? `${where}.${key}` : key;
    if (isOperatorName(key)) {
      if (LOGICAL_OPERATORS.has(key)) out[key] = validateLogical(key, value, at);
      else if (key === '$comment') continue;
      // An aggregation expression, evaluated per document by mingo's expression operators; a
      // failing one is the match's BadValue. Targeting and SQL narrowing pass it over.
      else if (key === '$expr') out[key] = value as Value;
      else if (UNSUPPORTED_TOP_LEVEL.has(key)) throw badValue(`${key} is not supported (at '${at}').`, { operator: key, path: at });
      else throw badValue(`Unknown top-level operator ${key} at '${at}'.`, { operator: key, path: at });
    } else {
      out[key] = validateCondition(value, key);
    }
  }
  return out;
}

function validateLogical(operator: string, value: unknown, at: string): Value {
  if (!Array.isArray(value) || value.length === 0) {
    throw badValue(`${operator} at '${at}' needs a non-empty array of filters.`, { operator, path: at });
  }
  return value.map((item, i) => validateFilter(item, `${at}.${i}`));
}

/** Validates the condition on one field: a value to equal, a regex, or a document of operators. */
function validateCondition(value: unknown, path: string): Value {
  if (isRegex(value)) return asRegExp(value, path);
  if (!isDocument(value)) {
    typeBracketOf(value as Value);
    return value as Value;
  }
  const keys = Object.keys(value);
  const operators = keys.filter(isOperatorName);
  if (operators.length === 0) return value;
  if (operators.length !== keys.length) {
    const field = keys.find((k) => !isOperatorName(k));
    throw badValue(`The condition on '${path}' mixes operators and the field '${field}'; use {'${path}.${field}': ...} or $eq.`, { path });
  }
  return validateOperators(value, path);
}

// One case per query operator, each a few lines: longer than a function should be, but it reads as
// the operator table it is, and splitting it would scatter that table.
function validateOperators(operators: ValueObject, path: string): ValueObject {
  const out: Record<string, Value> = {};
  for (const [operator, operand] of Object.entries(operators)) {
    const fail = (what: string): never => {
      throw badValue(`${operator} at '${path}' ${what}, got ${display(operand)}.`, { operator, path });
    };
    if (VALUE_OPERATORS.has(operator)) {
      typeBracketOf(operand);
      out[operator] = operand;
      continue;
    }
    switch (operator) {
      case '$in':
      case '$nin':
        if (!Array.isArray(operand)) fail('needs an array');
        out[operator] = (operand as Value[]).map((item) => {
          if (isDocument(item) && Object.keys(item).some(isOperatorName)) fail('cannot hold an operator document');
          return isRegex(item) ? asRegExp(item, path) : (typeBracketOf(item), item);
        });
        break;
      case '$exists':
        out[operator] = operand;
        break;
      case '$type': {
        const list = Array.isArray(operand) ? (operand as Value[]) : [operand];
        if (list.length === 0) fail('needs at least one type');
        out[operator] = list.map((t) => {
          const name = typeof t === 'string' ? t : typeBracketOf(t) === 'number' ? BSON_TYPE_NUMBERS[Number(numericValueOf(t))] : undefined;
          if (name === undefined || !BSON_TYPE_NAMES.has(name)) fail('needs a BSON type name or number');
          return name as string;
        });
        break;
      }
      case '$regex': {
        const options = operators['$options'];
        if (options !== undefined && typeof options !== 'string') fail('has $options that is not a string');
        if (typeof operand === 'string') out[operator] = toRegExp(operand, (options as string | undefined) ?? '', path);
        else if (isRegex(operand))
          out[operator] =
            options === undefined ? asRegExp(operand, path) : toRegExp(asRegExp(operand, path).source, options as string, path);
        else fail('needs a string or a regular expression');
        break;
      }
      case '$options':
        if (operators['$regex'] === undefined) fail('needs $regex beside it');
        break;
      case '$not':
        if (isRegex(operand)) out[operator] = asRegExp(operand, path);
        else if (isDocument(operand) && Object.keys(operand).length > 0 && Object.keys(operand).every(isOperatorName))
          out[operator] = validateOperators(operand, path);
        else fail('needs a regular expression or a document of operators');
        break;
      case '$elemMatch':
        if (!isDocument(operand)) fail('needs a document');
        out[operator] = isElemMatchOnValues(operand as ValueObject)
          ? validateOperators(operand as ValueObject, path)
          : validateFilter(operand, `${path}.$elemMatch`);
        break;
      case '$size': {
        const n = typeBracketOf(operand) === 'number' ? Number(numericValueOf(operand)) : NaN;
        if (!Number.isInteger(n) || n < 0) fail('needs a non-negative integer');
        out[operator] = n;
        break;
      }
      case '$all':
        if (!Array.isArray(operand)) fail('needs an array');
        out[operator] = (operand as Value[]).map((item) => {
          if (isRegex(item)) return asRegExp(item, path);
          if (isDocument(item) && Object.hasOwn(item, '$elemMatch')) return validateOperators(item, path);
          return item;
        });
        break;
      default:
        if (UNSUPPORTED_FIELD_OPERATORS.has(operator)) throw badValue(`${operator} is not supported (at '${path}').`, { operator, path });
        throw badValue(`Unknown operator ${operator} at '${path}'.`, { operator, path });
    }
  }
  return out;
}

/** `$elemMatch: {$gt: 1}` matches elements as values; `$elemMatch: {a: 1}` (or `$and`...) as documents. */
function isElemMatchOnValues(criteria: ValueObject): boolean {
  const keys = Object.keys(criteria);
  return keys.length > 0 && keys.every((k) => isOperatorName(k) && !LOGICAL_OPERATORS.has(k));
}

/** Compiles a validated `$elemMatch` criteria into a predicate over one array element, in `context`. */
function compileElemMatch(criteria: ValueObject, context: Context): (element: Value) => boolean {
  if (isElemMatchOnValues(criteria)) {
    const query = new Query({ element: withoutBigInts(criteria) }, { context });
    return (element) => query.test({ element });
  }
  const query = new Query(withoutBigInts(criteria) as ValueObject, { context });
  return (element) => isDocument(element) && query.test(element);
}

type MingoQueryOps = Parameters<typeof Context.init>[0] extends infer O ? (O extends { query?: infer Q } ? Q : never) : never;

/** The mingo context of each string order: byte order (undefined) and each collation's, built once. */
const contexts = new Map<StringComparator | undefined, Context>();

function contextFor(strings: StringComparator | undefined): Context {
  let context = contexts.get(strings);
  if (context === undefined) {
    const elemMatch = (criteria: ValueObject) => compileElemMatch(criteria, context!);
    context = Context.init({
      query: { ...mingoQueryOperators, ...buildFieldOperators(elemMatch, strings) } as unknown as MingoQueryOps,
      expression: { ...expressionOperators, ...collatedComparisons(() => strings) } as never,
    });
    contexts.set(strings, context);
  }
  return context;
}
