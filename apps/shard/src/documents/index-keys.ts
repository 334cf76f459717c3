import {
  type ChunkRange,
  type ShardKeyPattern,
  TesseraError,
  type Value,
  type ValueObject,
  encodeKey,
  hashShardKeyValue,
  typeBracketOf,
} from '@tessera/core';
import { isFullKeySpace, keyRangesForFilter } from '@tessera/query';

/**
 * Secondary index keys, pure. An index key is a tuple of one value per index field, encoded
 * with core `encodeKey` like a shard key, so a btree over the bytes follows MongoDB's
 * cross-type order.
 */

/** One index entry of a document: the encoded key and the values it encodes (for error messages). */
export interface IndexEntry {
  key: Buffer;
  values: readonly Value[];
}

/** MongoDB's default index name: `a_1_b_hashed` for `{ a: 1, b: "hashed" }`. Throws nothing. */
export function defaultIndexName(pattern: ShardKeyPattern): string {
  return pattern.fields.map((f) => `${f.path}_${f.hashed ? 'hashed' : '1'}`).join('_');
}

/** True when `prefix`'s fields are the first fields of `pattern`, by path (MongoDB compares names only). */
export function isPatternPrefix(prefix: ShardKeyPattern, pattern: ShardKeyPattern): boolean {
  return prefix.fields.length <= pattern.fields.length && prefix.fields.every((f, i) => pattern.fields[i]?.path === f.path);
}

/**
 * A document's entries in an index, deduplicated, as MongoDB's key generation: a missing field
 * is null; an array in a field makes the index multikey, one entry per element (an empty array
 * gives null); arrays met along a dotted path are expanded too. Extra entries are harmless for
 * lookups (the filter re-checks every document), a missing one would lose documents, so where
 * MongoDB's rules are subtle (numeric path segments into arrays, nested arrays) we add both.
 * Throws `BAD_VALUE` for arrays in two fields of a compound index ("cannot index parallel
 * arrays") and for an array in a hashed field.
 */
export function indexEntriesOf(pattern: ShardKeyPattern, document: ValueObject): IndexEntry[] {
  let arrayField: string | undefined;
  const perField = pattern.fields.map((field) => {
    const state = { sawArray: false };
    const values: Value[] = [];
    collect(document, field.path.split('.'), values, state);
    if (state.sawArray) {
      if (field.hashed) {
        throw new TesseraError('BAD_VALUE', `hashed indexes do not support array values (field "${field.path}")`, {
          details: { field: field.path },
        });
      }
      if (arrayField !== undefined) {
        throw new TesseraError('BAD_VALUE', `cannot index parallel arrays [${arrayField}] [${field.path}]`, {
          details: { fields: [arrayField, field.path] },
        });
      }
      arrayField = field.path;
    }
    return field.hashed ? values.map((v) => hashShardKeyValue(v) as Value) : values;
  });
  let tuples: Value[][] = [[]];
  for (const values of perField) tuples = tuples.flatMap((tuple) => values.map((v) => [...tuple, v]));
  const entries = new Map<string, IndexEntry>();
  for (const values of tuples) {
    const key = Buffer.from(encodeKey(values));
    entries.set(key.toString('hex'), { key, values });
  }
  return [...entries.values()];
}

function collect(current: Value | undefined, segments: readonly string[], out: Value[], state: { sawArray: boolean }): void {
  if (current === undefined) {
    out.push(null);
    return;
  }
  if (Array.isArray(current)) {
    state.sawArray = true;
    if (current.length === 0) out.push(null);
    if (segments.length === 0) {
      for (const element of current as Value[]) out.push(element);
      return;
    }
    const [segment] = segments;
    if (/^\d+$/.test(segment!)) collect((current as Value[])[Number(segment)], segments.slice(1), out, state);
    for (const element of current as Value[]) collect(element, segments, out, state);
    return;
  }
  if (segments.length === 0) {
    out.push(current);
    return;
  }
  if (current === null || typeof current !== 'object' || typeBracketOf(current) !== 'object') {
    out.push(null);
    return;
  }
  const [segment, ...rest] = segments;
  const object = current as ValueObject;
  collect(Object.hasOwn(object, segment!) ? (object[segment!] as Value) : undefined, rest, out, state);
}

/**
 * The index key ranges that hold every document `filter` can match, or undefined when the
 * index cannot narrow the scan (its first field is unconstrained).
 *
 * `keyRangesForFilter` intersects conditions, which is right for a shard key (never an array)
 * but not for a multikey index: `{ a: { $gt: 5, $lt: 3 } }` matches `a: [6, 1]` through two
 * different elements, while no single entry lies in both. So the ranges come from a weaker
 * filter in which each index field keeps one condition with one operator (equality, `$eq`,
 * `$in`, else one bound) on scalar operands, taken from the top level and top-level `$and`s:
 * a document matching the filter matches the weaker one through some element, whose entry is
 * in the ranges. Array and regex operands, `$or` and negations are left out (a weaker filter
 * is still a superset).
 */
export function indexRangesForFilter(pattern: ShardKeyPattern, filter: ValueObject): ChunkRange[] | undefined {
  const conjuncts = topLevelConjuncts(filter);
  const weaker: Record<string, Value> = {};
  for (const field of pattern.fields) {
    for (const [path, condition] of conjuncts) {
      if (path !== field.path) continue;
      const single = singleCondition(condition);
      if (single !== undefined) {
        weaker[path] = single;
        break;
      }
    }
  }
  if (!Object.hasOwn(weaker, pattern.fields[0]!.path)) return undefined;
  const ranges = keyRangesForFilter(pattern, weaker);
  return isFullKeySpace(pattern, ranges) ? undefined : ranges;
}

function topLevelConjuncts(filter: ValueObject): Array<[string, Value]> {
  const out: Array<[string, Value]> = [];
  for (const [key, value] of Object.entries(filter)) {
    if (key === '$and' && Array.isArray(value)) {
      for (const sub of value as Value[]) if (isPlainObject(sub)) out.push(...topLevelConjuncts(sub as ValueObject));
    } else if (!key.startsWith('$')) {
      out.push([key, value as Value]);
    }
  }
  return out;
}

const BOUNDS = ['$gte', '$gt', '$lte', '$lt'] as const;

function singleCondition(condition: Value): Value | undefined {
  if (!isOperatorObject(condition)) return isScalarOperand(condition) ? condition : undefined;
  const ops = condition as ValueObject;
  if (Object.hasOwn(ops, '$eq') && isScalarOperand(ops['$eq'] as Value)) return { $eq: ops['$eq'] as Value };
  const inList = ops['$in'];
  if (Array.isArray(inList) && (inList as Value[]).every(isScalarOperand)) return { $in: inList };
  for (const op of BOUNDS) if (Object.hasOwn(ops, op) && isScalarOperand(ops[op] as Value)) return { [op]: ops[op] as Value };
  return undefined;
}

function isScalarOperand(value: Value): boolean {
  if (value === undefined || Array.isArray(value) || isOperatorObject(value)) return false;
  return typeBracketOf(value) !== 'regex';
}

function isPlainObject(value: Value): boolean {
  return value !== null && typeof value === 'object' && !Array.isArray(value) && typeBracketOf(value) === 'object';
}

function isOperatorObject(value: Value): boolean {
  if (!isPlainObject(value)) return false;
  const keys = Object.keys(value as ValueObject);
  return keys.length > 0 && keys.every((k) => k.startsWith('$'));
}
