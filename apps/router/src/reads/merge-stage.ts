/**
 * The `$merge` stage, which ends a pipeline by writing its results: parsed here into the
 * router's update statements (`$out` is out-stage.ts). `$merge` writes each result by its `on`
 * fields (default `_id`), in MongoDB's modes:
 *
 * - `whenMatched`: `merge` ($set), `replace`, `keepExisting` ($setOnInsert), `fail` (an insert,
 *   which a duplicate key refuses), or an update pipeline, whose expressions read the result as
 *   `$$new` and the stage's `let` variables, evaluated over the result;
 * - `whenNotMatched`: `insert` (an upsert; after a pipeline, of the result as it is), `discard`
 *   (no upsert) or `fail` (no upsert, and `MergeStageNoMatchingDocument` when a result matched
 *   nothing).
 *
 * As MongoDB's, a `$merge` that fails part way leaves what it wrote.
 */
import { TesseraError, type Value, type ValueObject } from '@tessera/core';
import { checkUpdatePipeline, evaluateLet, isDocument } from '@tessera/query';

/** A parsed `$merge`: the target and the statement each result becomes. */
export interface MergeTarget {
  readonly db: string | undefined;
  readonly coll: string;
  readonly on: readonly string[];
  readonly whenMatched: 'merge' | 'replace' | 'keepExisting' | 'fail' | readonly ValueObject[];
  readonly whenNotMatched: 'insert' | 'discard' | 'fail';
  /** With a pipeline `whenMatched`: its variables, as expressions over each result. */
  readonly let?: ValueObject;
}

/** The statement that writes one result. */
export type MergeStatement =
  | { readonly insert: ValueObject }
  | { readonly q: ValueObject; readonly u: ValueObject | readonly ValueObject[]; readonly upsert: boolean; readonly c?: ValueObject };

const WHEN_MATCHED = new Set(['merge', 'replace', 'keepExisting', 'fail']);
const WHEN_NOT_MATCHED = new Set(['insert', 'discard', 'fail']);
/** The combinations MongoDB has no mode for. */
const UNSUPPORTED = new Set(['fail/fail', 'fail/discard', 'keepExisting/fail', 'keepExisting/discard']);

function badMerge(message: string): TesseraError {
  return new TesseraError('BAD_VALUE', message, { details: { field: 'pipeline.$merge' } });
}

/**
 * Reads a `$merge` specification. Throws `BAD_VALUE` for a malformed one, a combination of modes
 * MongoDB does not have, or `let` without a pipeline `whenMatched`; `FAILED_TO_PARSE` as
 * `checkUpdatePipeline` for a pipeline with a stage an update may not hold.
 */
export function parseMergeStage(stage: ValueObject): MergeTarget {
  const spec = stage['$merge'];
  if (typeof spec === 'string') return { db: undefined, coll: spec, on: ['_id'], whenMatched: 'merge', whenNotMatched: 'insert' };
  if (!isDocument(spec)) throw badMerge('$merge takes a collection name or a document with "into"');
  const into = spec['into'];
  const target =
    typeof into === 'string' ? { db: undefined, coll: into } : isDocument(into) ? { db: into['db'], coll: into['coll'] } : undefined;
  if (target === undefined || typeof target.coll !== 'string' || (target.db !== undefined && typeof target.db !== 'string'))
    throw badMerge('$merge "into" must be a collection name or { db, coll }');
  const on = spec['on'] === undefined ? ['_id'] : typeof spec['on'] === 'string' ? [spec['on']] : spec['on'];
  if (!Array.isArray(on) || on.length === 0 || !on.every((field) => typeof field === 'string'))
    throw badMerge('$merge "on" must be a field name or an array of them');
  const whenMatched = spec['whenMatched'] ?? 'merge';
  const whenNotMatched = spec['whenNotMatched'] ?? 'insert';
  const pipeline = Array.isArray(whenMatched) ? (whenMatched as ValueObject[]) : undefined;
  if (pipeline !== undefined) checkUpdatePipeline(pipeline);
  else if (typeof whenMatched !== 'string' || !WHEN_MATCHED.has(whenMatched))
    throw badMerge(
      `$merge whenMatched must be "merge", "replace", "keepExisting", "fail" or a pipeline, not ${JSON.stringify(whenMatched)}`,
    );
  if (typeof whenNotMatched !== 'string' || !WHEN_NOT_MATCHED.has(whenNotMatched))
    throw badMerge(`$merge whenNotMatched must be "insert", "discard" or "fail", not ${JSON.stringify(whenNotMatched)}`);
  if (pipeline === undefined && UNSUPPORTED.has(`${whenMatched as string}/${whenNotMatched}`))
    throw badMerge(`$merge has no mode for whenMatched: "${whenMatched as string}" with whenNotMatched: "${whenNotMatched}"`);
  const letSpec = spec['let'];
  if (letSpec !== undefined && (pipeline === undefined || !isDocument(letSpec)))
    throw badMerge(
      pipeline === undefined
        ? `Cannot use 'let' variables with 'whenMatched: ${whenMatched as string}' mode`
        : '$merge "let" must be a document of variables',
    );
  return {
    db: target.db as string | undefined,
    coll: target.coll,
    on: on as string[],
    whenMatched: pipeline ?? (whenMatched as 'merge' | 'replace' | 'keepExisting' | 'fail'),
    whenNotMatched: whenNotMatched as MergeTarget['whenNotMatched'],
    ...(isDocument(letSpec) ? { let: letSpec } : {}),
  };
}

/**
 * The statement (core values) that writes one result: for `whenMatched: "fail"`, the document to
 * insert. A pipeline's statement carries its variables as constants `c`, `new` being the result.
 * Throws `BAD_VALUE` when an `on` field is missing or an array.
 */
export function mergeStatement(target: MergeTarget, document: ValueObject): MergeStatement {
  const { whenMatched } = target;
  if (whenMatched === 'fail') return { insert: document };
  const q: Record<string, Value> = {};
  for (const field of target.on) {
    const value = document[field];
    if (value === undefined || Array.isArray(value))
      throw new TesseraError(
        'BAD_VALUE',
        `$merge write error: the "on" field '${field}' must be present and not an array in each document`,
        {
          details: { field: 'pipeline.$merge', on: field },
        },
      );
    q[field] = value;
  }
  const upsert = target.whenNotMatched === 'insert';
  if (typeof whenMatched !== 'string') {
    const variables = target.let === undefined ? {} : evaluateLet(document, target.let);
    return { q, u: whenMatched, upsert, c: { ...variables, new: document } };
  }
  switch (whenMatched) {
    case 'merge': {
      // The `on` fields are equal in the match by construction; setting them again would be an
      // update of `_id`, which the write path refuses.
      const changed = Object.fromEntries(Object.entries(document).filter(([field]) => !target.on.includes(field)));
      return { q, u: Object.keys(changed).length === 0 ? { $setOnInsert: document } : { $set: changed }, upsert };
    }
    case 'replace':
      return { q, u: document, upsert };
    case 'keepExisting':
      return { q, u: { $setOnInsert: document }, upsert };
  }
}
