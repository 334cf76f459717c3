/**
 * Shard key patterns (reference: sharded-cluster-internals-manual.rst, "Shard Keys"). A pattern
 * lists fields by dotted path, each ranged (`1`) or hashed (`"hashed"`); a compound pattern may
 * hold one hashed field (MongoDB 4.4+). A shard key is the tuple of one value per field, in
 * pattern order: a document's values for ranged fields, the 64-bit hash for the hashed one.
 */
import { MaxKey, MinKey } from 'bson';
import { TesseraError } from '../errors.js';
import { hashShardKeyValue } from '../hashing/hashed-value.js';
import type { Value, ValueObject } from '../values/value.js';
import { typeBracketOf } from '../values/value.js';
import { fromExtendedJsonObject } from '../values/extended-json.js';

/** One field of a shard key pattern. */
export interface ShardKeyField {
  /** Dotted path, e.g. `"user.id"`. */
  readonly path: string;
  readonly hashed: boolean;
}

/** A parsed, validated shard key pattern. */
export interface ShardKeyPattern {
  readonly fields: readonly ShardKeyField[];
}

/** A shard key value: one value per pattern field, in pattern order. Chunk bounds are shard keys too. */
export type ShardKey = readonly Value[];

/**
 * Parses a pattern such as `{ region: 1, "user.id": "hashed" }`.
 * Throws `BAD_VALUE` when it is empty, a value is neither 1 nor "hashed", more than one field
 * is hashed, a path is malformed (empty segment, `$` prefix, NUL) or one path is a prefix of another.
 */
export function parseShardKeyPattern(spec: Readonly<Record<string, unknown>>): ShardKeyPattern {
  const entries = Object.entries(spec);
  if (entries.length === 0) throw new TesseraError('BAD_VALUE', 'A shard key pattern needs at least one field.');
  const fields: ShardKeyField[] = [];
  for (const [path, kind] of entries) {
    validatePath(path);
    const hashed = kind === 'hashed';
    if (!hashed && kind !== 1) {
      throw new TesseraError('BAD_VALUE', `Shard key field "${path}" must be 1 or "hashed", got ${JSON.stringify(kind)}.`, {
        details: { field: path },
      });
    }
    for (const other of fields) {
      if (other.path.startsWith(`${path}.`) || path.startsWith(`${other.path}.`)) {
        throw new TesseraError('BAD_VALUE', `Shard key fields "${other.path}" and "${path}" overlap.`, { details: { field: path } });
      }
    }
    fields.push({ path, hashed });
  }
  if (fields.filter((f) => f.hashed).length > 1) {
    throw new TesseraError('BAD_VALUE', 'A shard key pattern may hold at most one hashed field.', { details: { pattern: spec } });
  }
  return { fields };
}

/** Returns the object form of a pattern, e.g. `{ region: 1, "user.id": "hashed" }`. Throws nothing. */
export function shardKeyPatternToObject(pattern: ShardKeyPattern): Record<string, 1 | 'hashed'> {
  return Object.fromEntries(pattern.fields.map((f) => [f.path, f.hashed ? 'hashed' : 1]));
}

/** True when one field of the pattern is hashed. Throws nothing. */
export function isHashedShardKey(pattern: ShardKeyPattern): boolean {
  return pattern.fields.some((f) => f.hashed);
}

/** Returns the lowest key of the pattern's key space, MinKey in every field. Throws nothing. */
export function globalMinKey(pattern: ShardKeyPattern): ShardKey {
  return pattern.fields.map(() => new MinKey());
}

/** Returns the highest key bound of the pattern's key space, MaxKey in every field. Throws nothing. */
export function globalMaxKey(pattern: ShardKeyPattern): ShardKey {
  return pattern.fields.map(() => new MaxKey());
}

/**
 * Extracts a document's shard key: for each field, the value at its path (null when missing),
 * hashed for the hashed field. Returns one value per pattern field.
 * Throws `BAD_VALUE`, naming the field, when a shard key field holds (or its path crosses) an
 * array, or holds a regular expression.
 */
export function extractShardKey(pattern: ShardKeyPattern, document: ValueObject): ShardKey {
  return pattern.fields.map((field) => {
    const value = valueAtPath(document, field.path) ?? null;
    if (typeBracketOf(value) === 'regex') {
      throw new TesseraError('BAD_VALUE', `Shard key field "${field.path}" cannot hold a regular expression.`, {
        details: { field: field.path },
      });
    }
    return field.hashed ? hashShardKeyValue(value) : value;
  });
}

/**
 * `extractShardKey` for a document as it came (parsed Extended JSON), decoding only the
 * top-level fields the key reads: a document decodes field by field, so this is the key of the
 * whole decoded document. `id`, when given, stands for a `_id` the document lacks (a generated
 * one). Throws as `extractShardKey`, and `FAILED_TO_PARSE` for a malformed wrapper in a key field.
 */
export function extractShardKeyFromWire(pattern: ShardKeyPattern, document: Readonly<Record<string, unknown>>, id?: Value): ShardKey {
  const fields: Record<string, Value> = {};
  for (const { path } of pattern.fields) {
    const dot = path.indexOf('.');
    const top = dot === -1 ? path : path.slice(0, dot);
    if (Object.hasOwn(document, top)) fields[top] = fromExtendedJsonObject(document[top]);
    else if (top === '_id' && id !== undefined) fields[top] = id;
  }
  return extractShardKey(pattern, fields);
}

/**
 * Reads the value at a dotted path of a document. Returns `undefined` when a segment is
 * missing or crosses a non-object. Throws `BAD_VALUE`, naming the path, when the value or any
 * value along the path is an array (a shard key cannot be multikey).
 */
export function valueAtPath(document: ValueObject, path: string): Value | undefined {
  let current: Value = document;
  // Segment by segment without splitting: this runs for every document a router or shard routes.
  for (let start = 0; start <= path.length; ) {
    const dot = path.indexOf('.', start);
    const end = dot === -1 ? path.length : dot;
    const segment = start === 0 && end === path.length ? path : path.slice(start, end);
    start = end + 1;
    if (Array.isArray(current)) throw arrayInKey(path);
    if (current === null || typeof current !== 'object' || typeBracketOf(current) !== 'object') return undefined;
    const object: ValueObject = current as ValueObject;
    if (!Object.hasOwn(object, segment)) return undefined;
    current = object[segment] as Value;
  }
  if (Array.isArray(current)) throw arrayInKey(path);
  return current;
}

/**
 * Returns the object form of a shard key (a chunk bound as stored), keyed by dotted path,
 * e.g. `{ region: "eu", "user.id": Long(...) }`. Throws `BAD_VALUE` when the key's length
 * differs from the pattern's.
 */
export function shardKeyToObject(pattern: ShardKeyPattern, key: ShardKey): Record<string, Value> {
  checkArity(pattern, key);
  return Object.fromEntries(pattern.fields.map((f, i) => [f.path, key[i] as Value]));
}

/**
 * Reads a shard key from its object form (keyed by dotted path, in any order). Returns one
 * value per pattern field. Throws `BAD_VALUE` when a field is missing or an extra field is present.
 */
export function shardKeyFromObject(pattern: ShardKeyPattern, object: Readonly<Record<string, Value>>): ShardKey {
  const extra = Object.keys(object).filter((k) => !pattern.fields.some((f) => f.path === k));
  if (extra.length > 0) {
    throw new TesseraError('BAD_VALUE', `Shard key has fields not in the pattern: ${extra.join(', ')}.`, { details: { fields: extra } });
  }
  return pattern.fields.map((f) => {
    if (!Object.hasOwn(object, f.path)) {
      throw new TesseraError('BAD_VALUE', `Shard key is missing field "${f.path}".`, { details: { field: f.path } });
    }
    return object[f.path] as Value;
  });
}

/**
 * Returns the shard key a query pins by equality on every pattern field (`{a: 5}` or
 * `{a: {$eq: 5}}`, dotted or nested), hashed where the pattern hashes; `undefined` when some
 * field is not pinned, so the router must target by range or broadcast.
 * Throws `BAD_VALUE` as `extractShardKey` for array or regex equality values.
 */
export function shardKeyFromEqualityQuery(pattern: ShardKeyPattern, query: ValueObject): ShardKey | undefined {
  const key: Value[] = [];
  for (const field of pattern.fields) {
    let value: Value | undefined = Object.hasOwn(query, field.path) ? query[field.path] : valueAtPath(query, field.path);
    if (value === undefined) return undefined;
    if (value !== null && typeof value === 'object' && typeBracketOf(value) === 'object') {
      const operators = Object.keys(value);
      if (operators.some((op) => op.startsWith('$'))) {
        if (operators.length !== 1 || operators[0] !== '$eq') return undefined;
        value = (value as ValueObject)['$eq'] as Value;
      }
    }
    if (Array.isArray(value)) throw arrayInKey(field.path);
    if (typeBracketOf(value) === 'regex') return undefined;
    key.push(field.hashed ? hashShardKeyValue(value) : value);
  }
  return key;
}

function checkArity(pattern: ShardKeyPattern, key: ShardKey): void {
  if (key.length !== pattern.fields.length) {
    throw new TesseraError('BAD_VALUE', `A shard key for this pattern has ${pattern.fields.length} values, got ${key.length}.`, {
      details: { expected: pattern.fields.length, actual: key.length },
    });
  }
}

function validatePath(path: string): void {
  const segments = path.split('.');
  if (path.length === 0 || segments.some((s) => s.length === 0 || s.startsWith('$') || s.includes('\u0000'))) {
    throw new TesseraError('BAD_VALUE', `Invalid shard key field path "${path}".`, { details: { field: path } });
  }
}

function arrayInKey(path: string): TesseraError {
  return new TesseraError('BAD_VALUE', `Shard key field "${path}" cannot hold an array.`, { details: { field: path } });
}
