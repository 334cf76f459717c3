/**
 * The field-level query operators whose semantics depend on comparing values. mingo compares
 * with JavaScript's types and knows nothing of BSON classes (ObjectId, Long, bigint, MinKey),
 * so these replace its `$eq $ne $gt $gte $lt $lte $in $nin $regex $type $all $size $exists` in the
 * mingo context: values compare with core `compareValues` (MongoDB's order, 1 == 1.0 ==
 * Long(1)), range operators only match within the operand's type bracket (`{$gt: 5}` never
 * matches a string), and paths are walked without looking inside BSON class instances.
 * mingo keeps the logical operators (`$and $or $nor $not`) and `$elemMatch`.
 */
import { compareValues, typeBracketOf } from '@tessera/core';
import type { StringComparator, TypeBracket, Value, ValueObject } from '@tessera/core';
import { asRegExp, isRegex, regexEquals, valuesAtPath } from '../values.js';

/** A mingo query operator: compiled once per filter, then called per document. */
type FieldOperator = (selector: string, operand: unknown) => (document: unknown) => boolean;

/** The values a path offers to a comparison: each reached value and, for arrays, their elements. */
function candidatesAt(document: unknown, selector: string): { values: Value[]; missing: boolean } {
  const reached = valuesAtPath(document as Value, selector);
  const values: Value[] = [];
  for (const value of reached) {
    values.push(value);
    if (Array.isArray(value)) values.push(...(value as readonly Value[]));
  }
  return { values, missing: reached.length === 0 };
}

function bracketOf(value: Value): TypeBracket | undefined {
  try {
    return typeBracketOf(value);
  } catch {
    return undefined;
  }
}

function safeCompare(a: Value, b: Value, strings?: StringComparator): number | undefined {
  try {
    return compareValues(a, b, strings);
  } catch {
    return undefined;
  }
}

/**
 * MongoDB equality: null also matches a missing field; an array matches when it or one of its
 * elements equals. Strings compare under `strings` (a collation) when given.
 */
export function matchesEquality(document: unknown, selector: string, operand: Value, strings?: StringComparator): boolean {
  const { values, missing } = candidatesAt(document, selector);
  if (operand === null && missing) return true;
  return values.some((v) => safeCompare(v, operand, strings) === 0);
}

function matchesRegex(document: unknown, selector: string, pattern: RegExp): boolean {
  const { values } = candidatesAt(document, selector);
  return values.some((v) => (typeof v === 'string' ? pattern.test(v) : isRegex(v) && regexEquals(v, pattern)));
}

function matchesIn(document: unknown, selector: string, operand: readonly Value[], strings: StringComparator | undefined): boolean {
  return operand.some((item) =>
    isRegex(item) ? matchesRegex(document, selector, asRegExp(item, selector)) : matchesEquality(document, selector, item, strings),
  );
}

type Comparison = (ordering: number) => boolean;

/** `$gt`-style operators: only values of the operand's type bracket compare, except MinKey/MaxKey which compare with all. */
function rangeOperator(test: Comparison, nullMatches: boolean, strings: StringComparator | undefined): FieldOperator {
  return (selector, operand) => {
    const bound = operand as Value;
    const bracket = bracketOf(bound);
    return (document) => {
      if (bound === null) return nullMatches && matchesEquality(document, selector, null, strings);
      const { values, missing } = candidatesAt(document, selector);
      if (bracket === 'minKey' || bracket === 'maxKey') {
        return (missing ? [null] : values).some((v) => {
          const c = safeCompare(v, bound, strings);
          return c !== undefined && test(c);
        });
      }
      return values.some((v) => {
        if (bracketOf(v) !== bracket) return false;
        const c = safeCompare(v, bound, strings);
        return c !== undefined && test(c);
      });
    };
  };
}

/** MongoDB's `$type` names for a value, as BSON would store it: an integral JS number fitting int32 is an `int`, as `bson` serialises it. */
export function bsonTypeNamesOf(value: Value): string[] {
  const bracket = bracketOf(value);
  switch (bracket) {
    case undefined:
      return [];
    case 'number': {
      const kind = numberKind(value);
      return [kind, 'number'];
    }
    case 'minKey':
    case 'maxKey':
    case 'null':
    case 'string':
    case 'object':
    case 'array':
    case 'binData':
    case 'objectId':
    case 'bool':
    case 'date':
    case 'timestamp':
    case 'regex':
      return [bracket];
  }
}

function numberKind(value: Value): 'int' | 'long' | 'double' {
  if (typeof value === 'bigint') return 'long';
  if (typeof value === 'number')
    return Number.isInteger(value) && value >= -(2 ** 31) && value < 2 ** 31 && !Object.is(value, -0) ? 'int' : 'double';
  const tag = (value as { _bsontype: string })._bsontype;
  return tag === 'Int32' ? 'int' : tag === 'Long' ? 'long' : 'double';
}

function matchesType(document: unknown, selector: string, names: ReadonlySet<string>): boolean {
  const reached = valuesAtPath(document as Value, selector);
  if (names.has('array') && reached.some((v) => Array.isArray(v))) return true;
  const { values } = candidatesAt(document, selector);
  return values.some((v) => !Array.isArray(v) && bsonTypeNamesOf(v).some((n) => names.has(n)));
}

/**
 * Builds the replacements for mingo's operators. `elemMatch(criteria)` compiles an `$elemMatch`
 * criteria into a predicate over one array element (used by `$all`). Strings compare under
 * `strings` (a collation) when given.
 */
export function buildFieldOperators(
  elemMatch: (criteria: ValueObject) => (element: Value) => boolean,
  strings?: StringComparator,
): Record<`$${string}`, FieldOperator> {
  return {
    $eq: (selector, operand) => (document) => matchesEquality(document, selector, operand as Value, strings),
    $ne: (selector, operand) => (document) => !matchesEquality(document, selector, operand as Value, strings),
    $gt: rangeOperator((c) => c > 0, false, strings),
    $gte: rangeOperator((c) => c >= 0, true, strings),
    $lt: rangeOperator((c) => c < 0, false, strings),
    $lte: rangeOperator((c) => c <= 0, true, strings),
    $in: (selector, operand) => (document) => matchesIn(document, selector, operand as Value[], strings),
    $nin: (selector, operand) => (document) => !matchesIn(document, selector, operand as Value[], strings),
    $regex: (selector, operand) => (document) => matchesRegex(document, selector, operand as RegExp),
    $type: (selector, operand) => {
      const names = new Set((Array.isArray(operand) ? operand : [operand]) as string[]);
      return (document) => matchesType(document, selector, names);
    },
    $exists: (selector, operand) => (document) => valuesAtPath(document as Value, selector).length > 0 === Boolean(operand),
    $size: (selector, operand) => (document) =>
      valuesAtPath(document as Value, selector).some((v) => Array.isArray(v) && v.length === operand),
    $all: (selector, operand) => {
      const items = operand as Value[];
      const tests = items.map((item): ((document: unknown) => boolean) => {
        if (isRegex(item)) {
          const pattern = asRegExp(item, selector);
          return (document) => matchesRegex(document, selector, pattern);
        }
        const criteria = (item as ValueObject | null)?.['$elemMatch'];
        if (criteria !== undefined && Object.keys(item as ValueObject).length === 1) {
          const test = elemMatch(criteria as ValueObject);
          return (document) => valuesAtPath(document as Value, selector).some((v) => Array.isArray(v) && (v as Value[]).some(test));
        }
        return (document) => matchesEquality(document, selector, item, strings);
      });
      return (document) => tests.length > 0 && tests.every((t) => t(document));
    },
  };
}
