/**
 * MongoDB's pipeline splitting for a sharded collection (`cluster_aggregation_planner`): the
 * leading `$match` stages become the filter that targets shards and scans their tables; the
 * stages that work one document at a time run on every shard; at the first stage that needs
 * all documents, the pipeline is cut. That stage gives each shard the part it can do alone (a
 * partial `$group` with mergeable accumulators, a `$sort` with the `$limit` after it, a
 * `$limit`) and leaves the router the part that merges (a merge-sort of the shards' sorted
 * streams, the final `$group`, the limit again) and everything after it.
 */
import { TesseraError, type Value, type ValueObject } from '@tessera/core';
import { validateFilter } from '../filter/parse-filter.js';
import { isDocument } from '../values.js';
import { stageName } from './run-pipeline.js';

export interface SplitPipeline {
  /** The leading `$match` stages as one find filter (`{}` when none): shards are targeted and scanned by it. */
  readonly filter: ValueObject;
  /** Stages each targeted shard runs over its matching documents. */
  readonly shardsPart: ValueObject[];
  /** When set, each shard's results come sorted by it and the router merges them in that order. */
  readonly mergeSort?: ValueObject;
  /** Stages the router runs over the merged results. */
  readonly mergerPart: ValueObject[];
}

/** Stages that write a collection: the router, which routes writes, runs them. */
const WRITING_STAGES = new Set(['$out', '$merge']);

/** Stages that map each document to zero or more documents on their own: every shard runs them. */
const STREAMING_STAGES = new Set([
  '$match',
  '$project',
  '$addFields',
  '$set',
  '$unset',
  '$unwind',
  '$replaceRoot',
  '$replaceWith',
  '$redact',
]);

/**
 * Splits a checked pipeline (`checkPipeline`). With `singleShard` (one shard targeted), the shard
 * runs everything up to the first stage that reads or writes another collection, as MongoDB sends a whole
 * pipeline to the one shard it targets. Throws as `collectionsRead`.
 */
export function splitPipeline(pipeline: readonly ValueObject[], singleShard = false): SplitPipeline {
  const { filter, rest } = leadingFilter(pipeline);
  if (singleShard) {
    const cut = rest.findIndex((stage) => WRITING_STAGES.has(stageName(stage)) || collectionsRead([stage]).size > 0);
    const end = cut === -1 ? rest.length : cut;
    return { filter, shardsPart: rest.slice(0, end), mergerPart: rest.slice(end) };
  }
  const shardsPart: ValueObject[] = [];
  let i = 0;
  while (i < rest.length && STREAMING_STAGES.has(stageName(rest[i]!))) shardsPart.push(rest[i++]!);
  if (i === rest.length) return { filter, shardsPart, mergerPart: [] };
  const stage = rest[i]!;
  const after = rest.slice(i + 1);
  switch (stageName(stage)) {
    case '$sort': {
      const limit = limitAfterSort(after);
      return {
        filter,
        shardsPart: [...shardsPart, stage, ...(limit === undefined ? [] : [{ $limit: limit }])],
        mergeSort: stage['$sort'] as ValueObject,
        mergerPart: after,
      };
    }
    case '$limit':
      return { filter, shardsPart: [...shardsPart, stage], mergerPart: [stage, ...after] };
    case '$count': {
      const name = stage['$count'] as string;
      return {
        filter,
        shardsPart: [...shardsPart, { $group: { _id: null, [name]: { $sum: 1 } } }],
        mergerPart: [{ $group: { _id: null, [name]: { $sum: `$${name}` } } }, { $project: { _id: 0 } }, ...after],
      };
    }
    case '$group': {
      const split = isDocument(stage['$group']) ? splitGroup(stage['$group']) : undefined;
      if (split !== undefined) return { filter, shardsPart: [...shardsPart, split.partial], mergerPart: [...split.merge, ...after] };
      return { filter, shardsPart, mergerPart: [stage, ...after] };
    }
    default:
      return { filter, shardsPart, mergerPart: [stage, ...after] };
  }
}

/** The leading `$match` stages as one filter, as long as find's filter language reads them. */
function leadingFilter(pipeline: readonly ValueObject[]): { filter: ValueObject; rest: ValueObject[] } {
  const filters: ValueObject[] = [];
  let i = 0;
  for (; i < pipeline.length && stageName(pipeline[i]!) === '$match'; i++) {
    const match = pipeline[i]!['$match'];
    if (!isDocument(match) || !readsAsFilter(match)) break;
    filters.push(match);
  }
  const filter = filters.length === 0 ? {} : filters.length === 1 ? filters[0]! : { $and: filters };
  return { filter, rest: pipeline.slice(i) };
}

function readsAsFilter(match: ValueObject): boolean {
  try {
    validateFilter(match, '');
    return true;
  } catch {
    return false;
  }
}

/**
 * What each shard may keep of a `$sort`'s results: `$limit n` right after it, or `$skip s` then
 * `$limit n` (the shard keeps `s + n`; the router skips), as MongoDB's top-k pushdown.
 */
function limitAfterSort(after: readonly ValueObject[]): number | undefined {
  const [next, second] = after;
  const numberOf = (value: unknown): number | undefined =>
    typeof value === 'number' && Number.isSafeInteger(value) && value > 0 ? value : undefined;
  if (next !== undefined && stageName(next) === '$limit') return numberOf(next['$limit']);
  if (next !== undefined && second !== undefined && stageName(next) === '$skip' && stageName(second) === '$limit') {
    const skip = typeof next['$skip'] === 'number' && Number.isSafeInteger(next['$skip']) && next['$skip'] >= 0 ? next['$skip'] : undefined;
    const limit = numberOf(second['$limit']);
    return skip === undefined || limit === undefined ? undefined : skip + limit;
  }
  return undefined;
}

/**
 * A `$group` as a partial group on each shard and a merging group on the router, when every
 * accumulator merges: `$sum`, `$count`, `$min`, `$max` (the same operator over the partials),
 * `$avg` (sum and count of numbers, divided after the merge), `$push` and `$addToSet` (the
 * partial arrays concatenated or unioned). Any other accumulator keeps the whole `$group` on the
 * router. The router's last stage restores the fields' order and finishes `$avg`, `$push` and
 * `$addToSet`.
 */
function splitGroup(spec: ValueObject): { partial: ValueObject; merge: ValueObject[] } | undefined {
  const { _id, ...fields } = spec;
  const partial: Record<string, Value> = { _id: _id ?? null };
  const merging: Record<string, Value> = { _id: '$_id' };
  const finish: Record<string, Value> = { _id: 1 };
  let finishing = false;
  for (const [field, accumulator] of Object.entries(fields)) {
    if (!isDocument(accumulator) || Object.keys(accumulator).length !== 1) return undefined;
    const [operator, argument] = Object.entries(accumulator)[0]!;
    const partialField = `$${field}`;
    finish[field] = partialField;
    switch (operator) {
      case '$sum':
      case '$min':
      case '$max':
        partial[field] = { [operator]: argument };
        merging[field] = { [operator]: partialField };
        break;
      case '$count':
        partial[field] = { $sum: 1 };
        merging[field] = { $sum: partialField };
        break;
      case '$avg': {
        const count = unusedName(`${field}_count`, fields);
        partial[field] = { $sum: argument };
        partial[count] = { $sum: { $cond: [{ $isNumber: argument }, 1, 0] } };
        merging[field] = { $sum: partialField };
        merging[count] = { $sum: `$${count}` };
        finish[field] = { $cond: [{ $eq: [`$${count}`, 0] }, null, { $divide: [partialField, `$${count}`] }] };
        finishing = true;
        break;
      }
      case '$push':
      case '$addToSet': {
        partial[field] = { [operator]: argument };
        merging[field] = { $push: partialField };
        const combine = operator === '$push' ? '$concatArrays' : '$setUnion';
        finish[field] = { $reduce: { input: partialField, initialValue: [], in: { [combine]: ['$$value', '$$this'] } } };
        finishing = true;
        break;
      }
      default:
        return undefined;
    }
  }
  return { partial: { $group: partial }, merge: [{ $group: merging }, ...(finishing ? [{ $project: finish }] : [])] };
}

/** `name`, or `name` with underscores added until no field of the group uses it. */
function unusedName(name: string, fields: ValueObject): string {
  let candidate = name;
  while (Object.hasOwn(fields, candidate)) candidate = `_${candidate}`;
  return candidate;
}

/**
 * The collections stages read besides their own: `from` of `$lookup` and `$graphLookup`, and
 * `$unionWith`'s, in their nested pipelines and `$facet`'s too. Only the router can read them.
 * Throws `INVALID_NAMESPACE` for a name that is empty or holds a `$`.
 */
export function collectionsRead(stages: readonly ValueObject[]): Set<string> {
  const names = new Set<string>();
  const visit = (pipeline: unknown): void => {
    if (!Array.isArray(pipeline)) return;
    for (const stage of pipeline as ValueObject[]) {
      if (!isDocument(stage)) continue;
      const name = stageName(stage);
      const spec = stage[name];
      if (name === '$unionWith') {
        const coll = isDocument(spec) ? spec['coll'] : spec;
        if (typeof coll === 'string') names.add(coll);
        if (isDocument(spec)) visit(spec['pipeline']);
      } else if ((name === '$lookup' || name === '$graphLookup') && isDocument(spec)) {
        if (typeof spec['from'] === 'string') names.add(spec['from']);
        visit(spec['pipeline']);
      } else if (name === '$facet' && isDocument(spec)) {
        for (const inner of Object.values(spec)) visit(inner);
      }
    }
  };
  visit(stages);
  for (const name of names) {
    if (name.length === 0 || name.includes('$'))
      throw new TesseraError('INVALID_NAMESPACE', `invalid collection name '${name}' in a pipeline stage`, {
        details: { field: 'pipeline' },
      });
  }
  return names;
}
