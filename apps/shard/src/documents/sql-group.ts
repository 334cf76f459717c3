/**
 * A shard's `$group` computed by Postgres, when Postgres can give exactly MongoDB's answer: the
 * rows stay in the database and only the groups come back. It applies when
 *
 * - the filter is made of top-level string or boolean equalities and `$in`s (translated exactly,
 *   arrays included: an array matches when one of its elements does, as MongoDB's equality),
 * - the group key is `null` or a top-level `$field`,
 * - every accumulator is `$sum` of a number or a `$field`, `$count`, `$avg`, `$min` or `$max` of
 *   a `$field`, or the router's partial `$avg` count (`$sum` of `$cond` of `$isNumber`),
 * - and the read is of now (not a snapshot), so this shard's owned ranges are known as SQL.
 *
 * Values Postgres would not compare as MongoDB does make the answer `undefined` after the
 * query, and the caller runs the stage itself: a group key that is a document or an array, a
 * summed or averaged field holding a wrapped number (`$numberLong`, `$numberDecimal`, NaN), a
 * `$min`/`$max` field holding anything but numbers and nulls, a sum past 2^53.
 */
import { type ChunkRange, type ShardKeyPattern, type Value, type ValueObject, encodeKey, valuesEqual } from '@tessera/core';
import { isDocument, validateFilter } from '@tessera/query';
import { stringOrBooleanEquality } from './document-scan.js';

/** A planned group: its SQL (over `relation`, after `where`), and how to read its rows into documents. */
export interface SqlGroup {
  readonly sql: string;
  readonly params: unknown[];
  /** The group documents of the query's rows; undefined when a value needs MongoDB's own comparison. */
  documents(rows: ReadonlyArray<Record<string, unknown>>): ValueObject[] | undefined;
}

type Accumulator = { field: string; kind: 'count' | 'sum' | 'avg' | 'min' | 'max' | 'numbers'; path?: string; times?: number };

/** Builds the group query, or undefined when the filter, key, accumulators or ownership do not fit. */
export function planSqlGroup(
  relation: string,
  where: { sql: string; params: unknown[] },
  filter: ValueObject,
  group: Value,
  pattern: ShardKeyPattern,
  ownedRanges: 'all' | 'none' | readonly ChunkRange[],
): SqlGroup | undefined {
  if (!isDocument(group) || ownedRanges === 'none') return undefined;
  const params = [...where.params];
  const param = (value: unknown) => {
    params.push(value);
    return `$${params.length}`;
  };
  const conditions = filterSql(validateFilter(filter, ''), param);
  const owned = ownedRanges === 'all' ? 'true' : ownedSql(ownedRanges, pattern, param);
  if (conditions === undefined || owned === undefined) return undefined;
  const { _id: key, ...fields } = group;
  const keyPath = key === null ? null : topLevelPath(key);
  if (keyPath === undefined) return undefined;
  const accumulators: Accumulator[] = [];
  for (const [field, spec] of Object.entries(fields)) {
    const accumulator = accumulatorOf(field, spec);
    if (accumulator === undefined) return undefined;
    accumulators.push(accumulator);
  }
  const columns: string[] = ['count(*) AS n'];
  if (keyPath !== null) {
    const at = `doc->${param(keyPath)}::text`;
    columns.push(`coalesce(jsonb_typeof(${at}), 'null') AS key_type`);
    columns.push(`CASE WHEN jsonb_typeof(${at}) = 'number' THEN (${at}#>>'{}')::float8::text ELSE ${at}#>>'{}' END AS key_text`);
  }
  accumulators.forEach((a, i) => columns.push(...accumulatorSql(a, i, param)));
  const grouping = keyPath === null ? '' : ' GROUP BY 2, 3';
  // Each row's text is parsed once, into jsonb, rather than once per field read from it: OFFSET 0
  // keeps the planner from folding the subquery in and casting again at every use.
  const rows = `SELECT doc::jsonb AS doc FROM ${relation} WHERE ${where.sql} AND (${owned}) OFFSET 0`;
  const sql = `SELECT ${columns.join(', ')} FROM (${rows}) AS parsed WHERE ${conditions}${grouping}`;
  return { sql, params, documents: (rows) => groupDocuments(rows, keyPath !== null, accumulators) };
}

/** A `$field` naming a top-level field, as its name; undefined for anything else. */
function topLevelPath(value: Value | undefined): string | undefined {
  if (typeof value !== 'string' || !value.startsWith('$') || value.startsWith('$$')) return undefined;
  const path = value.slice(1);
  return path.length === 0 || path.includes('.') ? undefined : path;
}

const IS_NUMBER_COUNT = (path: string) => ({ $sum: { $cond: [{ $isNumber: `$${path}` }, 1, 0] } });

function accumulatorOf(field: string, spec: Value): Accumulator | undefined {
  if (!isDocument(spec) || Object.keys(spec).length !== 1) return undefined;
  const [operator, argument] = Object.entries(spec)[0]!;
  if (operator === '$count' && isDocument(argument) && Object.keys(argument).length === 0) return { field, kind: 'count' };
  if (operator === '$sum' && typeof argument === 'number' && Number.isFinite(argument)) return { field, kind: 'count', times: argument };
  if (operator === '$sum' && isDocument(argument)) {
    const path = topLevelPath(((argument['$cond'] as Value[] | undefined)?.[0] as ValueObject | undefined)?.['$isNumber']);
    return path !== undefined && valuesEqual(spec, IS_NUMBER_COUNT(path)) ? { field, kind: 'numbers', path } : undefined;
  }
  const path = topLevelPath(argument);
  if (path === undefined) return undefined;
  const kinds: Record<string, Accumulator['kind']> = { $sum: 'sum', $avg: 'avg', $min: 'min', $max: 'max' };
  const kind = kinds[operator];
  return kind === undefined ? undefined : { field, kind, path };
}

/** The columns of one accumulator: its value and the check that Postgres compared as MongoDB would. */
function accumulatorSql(a: Accumulator, i: number, param: (value: unknown) => string): string[] {
  if (a.kind === 'count') return [`count(*) AS v${i}`];
  const at = `doc->${param(a.path)}::text`;
  const isNumber = `jsonb_typeof(${at}) = 'number'`;
  const wrapped = `bool_or(jsonb_typeof(${at}) = 'object') AS x${i}`;
  switch (a.kind) {
    case 'numbers':
      return [`count(*) FILTER (WHERE ${isNumber}) AS v${i}`, wrapped];
    case 'sum':
      return [`coalesce(sum((${at}#>>'{}')::numeric) FILTER (WHERE ${isNumber}), 0)::text AS v${i}`, wrapped];
    case 'avg':
      return [`(avg((${at}#>>'{}')::numeric) FILTER (WHERE ${isNumber}))::float8::text AS v${i}`, wrapped];
    case 'min':
    case 'max':
      return [
        `(${a.kind}((${at}#>>'{}')::float8) FILTER (WHERE ${isNumber}))::text AS v${i}`,
        `bool_or(jsonb_typeof(${at}) NOT IN ('number', 'null')) AS x${i}`,
      ];
  }
}

function groupDocuments(
  rows: ReadonlyArray<Record<string, unknown>>,
  keyed: boolean,
  accumulators: Accumulator[],
): ValueObject[] | undefined {
  const documents: ValueObject[] = [];
  for (const row of rows) {
    const document: Record<string, Value> = {};
    if (keyed) {
      const key = keyOf(row['key_type'] as string, row['key_text'] as string | null);
      if (key === undefined) return undefined;
      document['_id'] = key;
    } else {
      if (Number(row['n']) === 0) continue; // without GROUP BY, no documents still make one row
      document['_id'] = null;
    }
    for (const [i, a] of accumulators.entries()) {
      if (row[`x${i}`] === true) return undefined;
      const value = row[`v${i}`];
      if (a.kind === 'count' || a.kind === 'numbers') {
        document[a.field] = Number(value) * (a.times ?? 1);
        continue;
      }
      const number = value === null ? null : Number(value);
      if (number !== null && Number.isInteger(number) && !Number.isSafeInteger(number)) return undefined;
      document[a.field] = a.kind === 'sum' ? (number ?? 0) : number;
    }
    documents.push(document);
  }
  return documents;
}

/** A group key read back; undefined for a document or an array, which Postgres's text does not compare as MongoDB. */
function keyOf(type: string, text: string | null): Value | undefined {
  switch (type) {
    case 'null':
      return null;
    case 'string':
      return text;
    case 'boolean':
      return text === 'true';
    case 'number':
      return Number(text);
    default:
      return undefined;
  }
}

/**
 * The filter as exact SQL, or undefined when it holds anything but top-level string or boolean
 * equalities and `$in`s (and `$and`s of them). A field matches when it is one of the values, or
 * an array holding one of them.
 */
function filterSql(filter: ValueObject, param: (value: unknown) => string): string | undefined {
  const parts: string[] = [];
  for (const [field, condition] of Object.entries(filter)) {
    if (field === '$and' && Array.isArray(condition)) {
      for (const part of condition as Value[]) {
        const sql = isDocument(part) ? filterSql(part, param) : undefined;
        if (sql === undefined) return undefined;
        parts.push(sql);
      }
      continue;
    }
    if (field.startsWith('$') || field.includes('.')) return undefined;
    const values = stringOrBooleanEquality(condition);
    if (values === undefined) return undefined;
    const strings = param(values.filter((v) => typeof v === 'string'));
    const booleans = param(values.filter((v) => typeof v === 'boolean').map(String));
    const is = (value: string) =>
      `((jsonb_typeof(${value}) = 'string' AND ${value}#>>'{}' = ANY(${strings}::text[])) OR ` +
      `(jsonb_typeof(${value}) = 'boolean' AND ${value}#>>'{}' = ANY(${booleans}::text[])))`;
    const at = `doc->${param(field)}::text`;
    parts.push(
      `(${is(at)} OR (jsonb_typeof(${at}) = 'array' AND EXISTS (SELECT 1 FROM jsonb_array_elements(${at}) AS e WHERE ${is('e')})))`,
    );
  }
  return parts.length === 0 ? 'true' : parts.join(' AND ');
}

/** This shard's ranges as conditions on `shard_key`, adjacent ones merged; undefined when a range is of another arity (mid-refine). */
function ownedSql(ranges: readonly ChunkRange[], pattern: ShardKeyPattern, param: (value: unknown) => string): string | undefined {
  if (ranges.some((r) => r.min.length !== pattern.fields.length || r.max.length !== pattern.fields.length)) return undefined;
  const encoded = ranges
    .map((r) => ({ min: Buffer.from(encodeKey(r.min)), max: Buffer.from(encodeKey(r.max)) }))
    .sort((a, b) => Buffer.compare(a.min, b.min));
  const merged: Array<{ min: Buffer; max: Buffer }> = [];
  for (const range of encoded) {
    const last = merged.at(-1);
    if (last !== undefined && Buffer.compare(last.max, range.min) === 0) last.max = range.max;
    else merged.push({ ...range });
  }
  if (merged.length === 0) return 'false';
  return merged.map((r) => `(shard_key >= ${param(r.min)} AND shard_key < ${param(r.max)})`).join(' OR ');
}
