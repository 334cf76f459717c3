/**
 * Splitting a write batch into per-shard child batches (mongos's BatchWriteOp). Pure: the
 * statements arrive already routed, the plan is data.
 *
 * - Unordered: one wave, one child batch per shard holding every statement that targets it
 *   (a multi-shard statement is in several), all sent in parallel.
 * - Ordered: consecutive statements that go to the same single shard form one child batch;
 *   a statement that targets several shards is a wave of its own (one child batch per shard,
 *   in parallel). Waves run one after another and the batch stops at the first error, as
 *   MongoDB's ordered writes do.
 *
 * A child batch lists the user's statement indexes, so a shard's answer (indexes within the
 * child batch) maps back with `indexes[i]`.
 */
import type { ErrorEnvelope } from '@tessera/core';

/** A statement and the shards it must be sent to (empty: it can match nothing anywhere). */
export interface RoutedStatement {
  readonly index: number;
  readonly shards: readonly string[];
}

/** A statement the router refused before sending it anywhere. */
export interface RouterWriteError {
  readonly index: number;
  readonly error: ErrorEnvelope;
}

/** Statements of one request for one shard, by the user's indexes, in the user's order. */
export interface ChildBatch {
  readonly shard: string;
  readonly indexes: readonly number[];
}

/** Child batches sent together; waves run one after another. */
export type Wave = readonly ChildBatch[];

export interface WritePlan {
  readonly waves: readonly Wave[];
  /**
   * Router errors to report once the waves ran. For an ordered batch only the first one
   * (statements after it are cut from the plan) and only if no wave failed before it.
   */
  readonly routerErrors: readonly RouterWriteError[];
}

/** Plans the child batches of one write batch. `statements` and `routerErrors` may interleave by index. */
export function planWriteWaves(
  statements: readonly RoutedStatement[],
  routerErrors: readonly RouterWriteError[],
  ordered: boolean,
): WritePlan {
  const sorted = [...statements].sort((a, b) => a.index - b.index);
  const errors = [...routerErrors].sort((a, b) => a.index - b.index);
  if (!ordered) {
    const byShard = new Map<string, number[]>();
    for (const statement of sorted) {
      for (const shard of statement.shards) {
        let indexes = byShard.get(shard);
        if (indexes === undefined) byShard.set(shard, (indexes = []));
        indexes.push(statement.index);
      }
    }
    const wave = [...byShard.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([shard, indexes]) => ({ shard, indexes }));
    return { waves: wave.length === 0 ? [] : [wave], routerErrors: errors };
  }
  const firstError = errors[0];
  const waves: ChildBatch[][] = [];
  let run: { shard: string; indexes: number[] } | undefined;
  for (const statement of sorted) {
    if (firstError !== undefined && statement.index > firstError.index) break;
    if (statement.shards.length === 0) continue;
    const only = statement.shards.length === 1 ? statement.shards[0] : undefined;
    if (only !== undefined && run !== undefined && run.shard === only) {
      run.indexes.push(statement.index);
      continue;
    }
    if (only !== undefined) {
      run = { shard: only, indexes: [statement.index] };
      waves.push([run]);
    } else {
      run = undefined;
      waves.push(statement.shards.map((shard) => ({ shard, indexes: [statement.index] })));
    }
  }
  return { waves, routerErrors: firstError === undefined ? [] : [firstError] };
}
