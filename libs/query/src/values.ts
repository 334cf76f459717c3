/**
 * Small helpers over core `Value`s shared by the query modules: which values are documents,
 * dotted-path walking that never looks inside BSON class instances, and printing for messages.
 */
import { BSONRegExp } from 'bson';
import { compareValues, regexParts, stringComparatorFor, TesseraError, toExtendedJson, typeBracketOf } from '@tessera/core';
import type { Collation, Value, ValueObject } from '@tessera/core';

/** True when `value` is an embedded document (a plain object, not a BSON class, array, Date or RegExp). Throws nothing. */
export function isDocument(value: unknown): value is ValueObject {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  if (value instanceof Date || value instanceof RegExp) return false;
  return typeof (value as { _bsontype?: unknown })._bsontype !== 'string';
}

/**
 * The distinct values of a list in MongoDB's value order, strings compared by `collation`. Of
 * values the collation calls equal, the least by bytes stands for them all, so the answer does
 * not depend on the order the values came in (which shard answered first). Throws nothing.
 */
export function distinctValues(values: readonly Value[], collation?: Collation): Value[] {
  const strings = stringComparatorFor(collation);
  const sorted = [...values].sort((a, b) => compareValues(a, b, strings) || compareValues(a, b));
  return sorted.filter((value, i) => i === 0 || compareValues(sorted[i - 1]!, value, strings) !== 0);
}

/** True when `field` names an operator (starts with `$`). Throws nothing. */
export function isOperatorName(field: string): boolean {
  return field.startsWith('$');
}

/** True when the document's keys are operators (`{$gt: 1}`), false when they are fields. Throws nothing. */
export function isOperatorObject(value: unknown): value is ValueObject {
  return isDocument(value) && Object.keys(value).some(isOperatorName);
}

/** True when `value` is a regular expression (`RegExp` or `BSONRegExp`). Throws nothing. */
export function isRegex(value: unknown): value is RegExp | BSONRegExp {
  return value instanceof RegExp || value instanceof BSONRegExp;
}

/** The flags JavaScript regular expressions share with MongoDB's (PCRE) options. */
const SUPPORTED_REGEX_FLAGS = new Set(['i', 'm', 's', 'u']);

/**
 * Returns a JavaScript `RegExp` for a pattern and MongoDB options. Throws `BAD_VALUE`, naming
 * `where`, for an option JavaScript lacks (`x`, extended) or an invalid pattern.
 */
export function toRegExp(pattern: string, options: string, where: string): RegExp {
  for (const flag of options) {
    if (!SUPPORTED_REGEX_FLAGS.has(flag)) {
      throw new TesseraError('BAD_VALUE', `Regular expression option '${flag}' at '${where}' is not supported (supported: i, m, s, u).`, {
        details: { path: where, option: flag },
      });
    }
  }
  try {
    return new RegExp(pattern, [...new Set(options)].join(''));
  } catch (cause) {
    throw new TesseraError('BAD_VALUE', `Invalid regular expression at '${where}': ${(cause as Error).message}`, {
      details: { path: where },
      cause,
    });
  }
}

/** Converts a `BSONRegExp` into a JavaScript `RegExp`; a `RegExp` passes through. Throws as `toRegExp`. */
export function asRegExp(value: RegExp | BSONRegExp, where: string): RegExp {
  return value instanceof RegExp ? value : toRegExp(value.pattern, value.options, where);
}

/**
 * Returns every value a dotted path reaches, descending into arrays as MongoDB does: an array
 * met along the path contributes each embedded document (and a numeric segment also indexes
 * it). Values inside BSON class instances (ObjectId, Long, ...) are never reached. The final
 * value is returned as is, arrays included. An empty result means the path is missing.
 * Throws nothing.
 */
export function valuesAtPath(document: Value, path: string): Value[] {
  const out: Value[] = [];
  collect(document, path.split('.'), 0, out);
  return out;
}

function collect(value: Value, segments: readonly string[], index: number, out: Value[]): void {
  if (index === segments.length) {
    out.push(value);
    return;
  }
  const segment = segments[index] as string;
  if (Array.isArray(value)) {
    const items = value as readonly Value[];
    if (/^\d+$/.test(segment)) {
      const item = items[Number(segment)];
      if (item !== undefined) collect(item, segments, index + 1, out);
    }
    for (const item of items) if (isDocument(item)) collect(item, segments, index, out);
    return;
  }
  if (isDocument(value) && Object.hasOwn(value, segment)) collect(value[segment] as Value, segments, index + 1, out);
}

/** Returns a short display form of a value for error messages (Extended JSON, cut at 120 characters). Throws nothing. */
export function display(value: unknown): string {
  let text: string;
  try {
    text = toExtendedJson(value as Value);
  } catch {
    text = String(value);
  }
  return text.length > 120 ? `${text.slice(0, 117)}...` : text;
}

/** Returns the name of a value's type bracket, or `typeof` for values outside the model. Throws nothing. */
export function typeNameOf(value: unknown): string {
  try {
    return typeBracketOf(value as Value);
  } catch {
    return typeof value;
  }
}

/** True when two regular expressions have the same pattern and flags (`RegExp` or `BSONRegExp`). Throws nothing. */
export function regexEquals(a: RegExp | BSONRegExp, b: RegExp | BSONRegExp): boolean {
  const x = regexParts(a);
  const y = regexParts(b);
  return x.pattern === y.pattern && x.flags === y.flags;
}
