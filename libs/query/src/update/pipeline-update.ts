/**
 * Updates given as an aggregation pipeline (MongoDB 4.2+: `u: [{ $set: ... }, { $unset: ... }]`):
 * the stages MongoDB allows there, run by mingo on the one document. Expressions see `$$ROOT`
 * (the document before the stage), `$$NOW` (the update's time), the update's `let` variables as
 * `$$name` and the fields as `$field`.
 */
import { Aggregator } from 'mingo/aggregator';
import { Context, ProcessingMode } from 'mingo';
import * as expressionOperators from 'mingo/operators/expression';
import { $addFields, $project, $replaceRoot, $replaceWith, $set, $unset } from 'mingo/operators/pipeline';
import { TesseraError } from '@tessera/core';
import type { Value, ValueObject } from '@tessera/core';
import { display, isDocument } from '../values.js';

/** MongoDB's stages of an update pipeline: these and no other. */
const PIPELINE_UPDATE_STAGES = { $addFields, $set, $project, $unset, $replaceRoot, $replaceWith };

const CONTEXT = Context.init({ pipeline: PIPELINE_UPDATE_STAGES, expression: expressionOperators as never });

/**
 * `$$NOW` as the update's own time: mingo reads the clock itself, while MongoDB gives a statement
 * one `$$NOW`, which a retried write must see again.
 */
function withNow(value: unknown, now: Date): unknown {
  if (value === '$$NOW') return { $literal: now };
  if (Array.isArray(value)) return value.map((element) => withNow(element, now));
  if (isDocument(value))
    return Object.fromEntries(Object.entries(value).map(([key, field]) => [key, key === '$literal' ? field : withNow(field, now)]));
  return value;
}

/**
 * Checks an update pipeline's shape before any document is read. Throws `FAILED_TO_PARSE` for a
 * stage that is not a one-field document, or a stage MongoDB does not allow in an update
 * (`$match`, `$group`, ...), naming it and its position.
 */
export function checkUpdatePipeline(pipeline: readonly unknown[]): void {
  pipeline.forEach((stage, i) => {
    if (!isDocument(stage) || Object.keys(stage).length !== 1) {
      throw new TesseraError(
        'FAILED_TO_PARSE',
        `A pipeline stage must be a document with exactly one field, got ${display(stage as Value)} at stage ${i}.`,
        {
          details: { field: `u.${i}` },
        },
      );
    }
    const name = Object.keys(stage)[0]!;
    if (!Object.hasOwn(PIPELINE_UPDATE_STAGES, name)) {
      throw new TesseraError(
        'FAILED_TO_PARSE',
        `${name} is not allowed to be used within an update; an update pipeline takes ${Object.keys(PIPELINE_UPDATE_STAGES).join(', ')}.`,
        { details: { field: `u.${i}`, stage: name } },
      );
    }
  });
}

/**
 * The document after `pipeline` (the input is untouched). Throws as `checkUpdatePipeline`, and
 * `BAD_VALUE` with mingo's reason when an expression fails on this document (a bad operand, or
 * arithmetic on a 64-bit integer, which mingo does not do) or the result is not a document.
 */
export function applyUpdatePipeline(document: ValueObject, pipeline: readonly unknown[], now: Date, variables?: ValueObject): ValueObject {
  checkUpdatePipeline(pipeline);
  let results: unknown[];
  try {
    const aggregator = new Aggregator(withNow(pipeline, now) as never, {
      context: CONTEXT,
      processingMode: ProcessingMode.CLONE_INPUT,
      scriptEnabled: false,
      ...(variables !== undefined ? { variables } : {}),
    });
    results = aggregator.run([document]);
  } catch (error) {
    if (error instanceof TesseraError) throw error;
    throw new TesseraError('BAD_VALUE', `The update pipeline failed on ${display(document['_id'] ?? null)}: ${(error as Error).message}`, {
      details: { field: 'u' },
    });
  }
  const result = results[0];
  if (results.length !== 1 || !isDocument(result)) {
    throw new TesseraError('BAD_VALUE', `An update pipeline must leave one document, got ${display((result ?? null) as Value)}.`, {
      details: { field: 'u' },
    });
  }
  return result as ValueObject;
}
