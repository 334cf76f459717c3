/**
 * Aggregation pipelines, checked as MongoDB checks them and run by mingo: every stage and
 * accumulator mingo implements, with Tessera's own `$match` (the same filter semantics as find)
 * and `$sort` (MongoDB's cross-type order, as find sorts), so that a stage means the same on a
 * shard, on the router and in a find.
 */
import { Aggregator } from 'mingo/aggregator';
import { Context, ProcessingMode } from 'mingo';
import { type Iterator, Lazy } from 'mingo/lazy';
import * as accumulatorOperators from 'mingo/operators/accumulator';
import * as expressionOperators from 'mingo/operators/expression';
import * as pipelineOperators from 'mingo/operators/pipeline';
import * as projectionOperators from 'mingo/operators/projection';
import * as queryOperators from 'mingo/operators/query';
import * as windowOperators from 'mingo/operators/window';
import { TesseraError, stringComparatorFor } from '@tessera/core';
import type { Collation, Value, ValueObject } from '@tessera/core';
import { parseFilter } from '../filter/parse-filter.js';
import { compileSort } from '../sort/sort.js';
import { collatedComparisons } from '../filter/collated-expressions.js';
import { collatedGroup, collatedSortByCount, collationOf } from './collated-group.js';
import { display, isDocument } from '../values.js';

/** Stages that must be the pipeline's last. */
const FINAL_STAGES = new Set(['$out', '$merge']);

/** mingo stages a collection's aggregate does not take (`$documents` belongs to a database-level aggregate). */
const NOT_ON_A_COLLECTION = new Set(['$documents']);

const { default: _pipelineDefault, ...mingoStages } = pipelineOperators as Record<string, unknown>;

/** The stage names an aggregate accepts, in MongoDB's spelling. */
export const PIPELINE_STAGES: ReadonlySet<string> = new Set(Object.keys(mingoStages).filter((name) => !NOT_ON_A_COLLECTION.has(name)));

/**
 * `$match` with find's semantics (type brackets, arrays, regexes as find matches them), `$expr`
 * included, reading the pipeline's `let` variables.
 */
function $match(collection: Iterator, filter: ValueObject, options: unknown): Iterator {
  const compiled = parseFilter(filter, collationOf(options), (options as { variables?: ValueObject } | undefined)?.variables);
  return collection.filter((document) => compiled.matches(document as ValueObject));
}

/** `$sort` in MongoDB's cross-type order (find's comparator); stable, as the router's merge expects. */
function $sort(collection: Iterator, spec: ValueObject, options: unknown): Iterator {
  const compare = compileSort(spec, collationOf(options));
  return collection.transform((documents) => Lazy([...(documents as ValueObject[])].sort(compare)));
}

/** A document's own copy: plain objects and arrays copied, BSON values (immutable) shared. */
function copied<T>(value: T): T {
  if (Array.isArray(value)) return value.map(copied) as T;
  if (isDocument(value)) return Object.fromEntries(Object.entries(value).map(([key, field]) => [key, copied(field)])) as T;
  return value;
}

type Stage = (collection: Iterator, spec: unknown, options: unknown) => Iterator;

/**
 * A stage that joins documents of another collection, each output its own copy: mingo embeds
 * the same foreign document in every output that joins it, and a later stage changing one
 * output's copy would change them all.
 */
function copyingOutputs(stage: Stage): Stage {
  return (collection, spec, options) => stage(collection, spec, options).map(copied);
}

const joins = mingoStages as Record<'$lookup' | '$graphLookup' | '$unionWith', Stage>;
const grouping = mingoStages as Record<'$group' | '$addFields' | '$sortByCount', Stage>;
const $group = collatedGroup(grouping.$group, grouping.$addFields);

/** A field name no document of the pipeline uses, to hold a join's matches for a moment. */
const MATCHED = '__tessera_lookup_matched';

/**
 * `$lookup` with `localField`/`foreignField` and a `pipeline` (MongoDB 5.0's concise form), as
 * MongoDB runs it: the pipeline runs over the documents the equality matched, with the `let`
 * variables of each input document. (mingo runs it over the whole foreign collection as soon as
 * one matches.) Every other form is mingo's.
 */
function $lookup(collection: Iterator, spec: ValueObject, options: unknown): Iterator {
  const pipeline = spec['pipeline'];
  if (
    !Array.isArray(pipeline) ||
    pipeline.length === 0 ||
    typeof spec['localField'] !== 'string' ||
    typeof spec['foreignField'] !== 'string'
  )
    return joins.$lookup(collection, spec, options);
  const { pipeline: _pipeline, let: letSpec, as, ...equality } = spec;
  const outer = options as { variables?: ValueObject; collectionResolver?: unknown };
  return joins.$lookup(collection, { ...equality, as: MATCHED }, options).map((joined) => {
    const { [MATCHED]: matched, ...document } = joined as ValueObject;
    const variables = isDocument(letSpec) ? evaluateLet(document, letSpec) : {};
    const inner = new Aggregator(pipeline as never, {
      context: CONTEXT,
      processingMode: ProcessingMode.CLONE_INPUT,
      scriptEnabled: true,
      variables: { ...outer.variables, ...variables },
      ...(outer.collectionResolver !== undefined ? { collectionResolver: outer.collectionResolver as never } : {}),
    });
    return { ...document, [as as string]: inner.run(matched as never) };
  });
}

/**
 * The values of a `let` (a `$lookup`'s, a `$merge`'s) or of a find projection's computed fields
 * for one input document: each an expression over it, reading `variables` as `$$name`.
 */
export function evaluateLet(document: ValueObject, letSpec: ValueObject, variables?: ValueObject): ValueObject {
  const [values] = new Aggregator([{ $replaceWith: letSpec }], {
    context: CONTEXT,
    scriptEnabled: true,
    ...(variables !== undefined ? { variables } : {}),
  }).run([document]) as ValueObject[];
  return values ?? {};
}

const CONTEXT = Context.init({
  pipeline: {
    ...mingoStages,
    $match,
    $sort,
    $group,
    $sortByCount: collatedSortByCount($group, grouping.$sortByCount, $sort as Stage),
    $lookup: copyingOutputs($lookup as Stage),
    $graphLookup: copyingOutputs(joins.$graphLookup),
    $unionWith: copyingOutputs(joins.$unionWith),
  } as never,
  accumulator: accumulatorOperators as never,
  expression: { ...expressionOperators, ...collatedComparisons((options) => stringComparatorFor(collationOf(options))) } as never,
  projection: projectionOperators as never,
  query: queryOperators as never,
  window: windowOperators as never,
});

function stageError(code: 'BAD_VALUE' | 'UNRECOGNIZED_PIPELINE_STAGE' | 'STAGE_NOT_LAST', message: string, index: number) {
  return new TesseraError(code, message, { details: { field: `pipeline.${index}` } });
}

/** `$count`'s field name: a non-empty string, not `$`-prefixed, without a dot (MongoDB's 40156, 40158, 40160). */
function checkCountName(name: unknown, index: number): void {
  if (typeof name !== 'string' || name.length === 0) throw stageError('BAD_VALUE', 'the count field must be a non-empty string', index);
  if (name.startsWith('$')) throw stageError('BAD_VALUE', 'the count field cannot be a $-prefixed path', index);
  if (name.includes('.')) throw stageError('BAD_VALUE', "the count field cannot contain '.'", index);
}

/** The name of a stage (its one field). */
export function stageName(stage: ValueObject): string {
  return Object.keys(stage)[0]!;
}

/**
 * Checks a pipeline's shape before anything runs, as MongoDB's parser does. Throws
 * `FAILED_TO_PARSE` when the pipeline is not an array of documents, `PIPELINE_STAGE_SHAPE`
 * (40323) for a stage that is not a one-field document, `UNRECOGNIZED_PIPELINE_STAGE` (40324)
 * for an unknown stage name, `STAGE_NOT_LAST` (40601) for `$out`/`$merge` before the end and
 * `BAD_VALUE` for a `$count` field name MongoDB refuses.
 */
export function checkPipeline(pipeline: unknown): ValueObject[] {
  if (!Array.isArray(pipeline)) {
    throw new TesseraError('FAILED_TO_PARSE', `'pipeline' option must be specified as an array, got ${display(pipeline as Value)}`, {
      details: { field: 'pipeline' },
    });
  }
  pipeline.forEach((stage: unknown, i) => {
    if (!isDocument(stage) || Object.keys(stage).length !== 1)
      throw new TesseraError('PIPELINE_STAGE_SHAPE', 'A pipeline stage specification object must contain exactly one field.', {
        details: { field: `pipeline.${i}` },
      });
    const name = stageName(stage);
    if (!PIPELINE_STAGES.has(name)) throw stageError('UNRECOGNIZED_PIPELINE_STAGE', `Unrecognized pipeline stage name: '${name}'`, i);
    if (FINAL_STAGES.has(name) && i !== pipeline.length - 1)
      throw stageError('STAGE_NOT_LAST', `${name} can only be the final stage in the pipeline`, i);
    if (name === '$count') checkCountName(stage['$count'], i);
    refuseScripts(stage, `pipeline.${i}`);
  });
  return pipeline as ValueObject[];
}

/** The operators that run JavaScript a user sends: Tessera runs none (MongoDB's `javascriptEnabled: false`). */
const SCRIPT_OPERATORS = new Set(['$function', '$accumulator', '$where']);

/**
 * Throws `BAD_VALUE` naming `field` when a script operator appears anywhere in `value` (a stage,
 * a `let`, a find projection's expressions).
 * mingo runs with scripts enabled because its `$setWindowFields` computes every output through an
 * internal `$function`; this walk is what keeps users' scripts out.
 */
export function refuseScripts(value: unknown, field: string): void {
  if (Array.isArray(value)) {
    for (const item of value) refuseScripts(item, field);
    return;
  }
  if (!isDocument(value)) return;
  for (const key of Object.keys(value)) {
    if (SCRIPT_OPERATORS.has(key)) {
      throw new TesseraError('BAD_VALUE', `${key} is not supported: Tessera runs no server-side JavaScript`, {
        details: { field },
      });
    }
    refuseScripts(value[key], field);
  }
}

export interface PipelineOptions {
  /** `let`: variables the pipeline's expressions read as `$$name`. */
  readonly variables?: ValueObject;
  /** The documents of a collection a `$lookup`/`$graphLookup`/`$unionWith` names, by name. */
  readonly collection?: (name: string) => ValueObject[];
  /** How `$match`, `$sort`, `$group` and `$sortByCount` compare strings (mingo's own sorting stages too); byte order without one. */
  readonly collation?: Collation | undefined;
}

/**
 * Runs `stages` over `documents` (which are not modified). Throws `BAD_VALUE` with mingo's
 * reason when a stage or expression fails (a bad operand, an unknown operator in an expression).
 */
export function runPipeline(
  documents: readonly ValueObject[],
  stages: readonly ValueObject[],
  options: PipelineOptions = {},
): ValueObject[] {
  if (stages.length === 0) return [...documents];
  stages.forEach((stage, i) => refuseScripts(stage, `pipeline.${i}`));
  refuseScripts(options.variables, 'let');
  try {
    const aggregator = new Aggregator(stages as never, {
      context: CONTEXT,
      processingMode: ProcessingMode.CLONE_INPUT,
      scriptEnabled: true,
      ...(options.variables !== undefined ? { variables: options.variables } : {}),
      ...(options.collection !== undefined ? { collectionResolver: options.collection as never } : {}),
      ...(options.collation !== undefined ? { collation: options.collation as never } : {}),
    });
    return aggregator.run(documents as never) as ValueObject[];
  } catch (error) {
    if (error instanceof TesseraError) throw error;
    throw new TesseraError('BAD_VALUE', `PlanExecutor error during aggregation :: caused by :: ${(error as Error).message}`, {
      details: { field: 'pipeline' },
    });
  }
}
