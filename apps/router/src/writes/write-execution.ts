/**
 * Runs a routed write batch: plans child batches (`planWriteWaves`), sends them, maps the
 * shards' per-statement errors back to the user's indexes, and handles stale routing.
 *
 * Stale routing: a shard answers `STALE_CONFIG`/`STALE_DB_VERSION` for a whole child batch
 * and applies none of it. The router marks its cache stale, routes the statements of that
 * batch again (for an ordered batch also every statement after it) and sends them in the next
 * round, at most `MAX_STALE_RETRIES` rounds. A multi-shard statement is not sent again to a
 * shard that already ran it, so a shard never applies a statement twice; as in MongoDB, a
 * multi-write racing a migration may still miss documents that moved meanwhile.
 *
 * Any other failure of a child batch (a shard unreachable, a command-level error) becomes a
 * write error for each of its statements, so the statements that did run are still reported.
 */
import { type ErrorEnvelope, TesseraError } from '@tessera/core';
import type { WriteErrorEntry } from '@tessera/protocol';
import { MAX_STALE_RETRIES } from '@tessera/routing';
import { type ChildBatch, type RoutedStatement, type RouterWriteError, planWriteWaves } from './write-plan.js';

/** How the statements route now: read the current routing table on each call. */
export interface StatementRouting {
  readonly statements: readonly RoutedStatement[];
  readonly routerErrors: readonly RouterWriteError[];
}

/** A shard's answer to a child batch: errors by index within that child batch. */
export interface ShardWriteReply {
  readonly writeErrors: readonly WriteErrorEntry[];
}

export interface WriteExecutionPorts<R extends ShardWriteReply> {
  /** Routes the given statements (sorted user indexes) with the current routing table. */
  route(indexes: readonly number[]): Promise<StatementRouting>;
  /** Sends one child batch to its shard. */
  send(batch: ChildBatch): Promise<R>;
  /** True (after marking the routing cache stale) when `error` means the routing was stale. */
  handleStale(error: unknown): boolean;
}

/** What happened to a batch: the shards' replies with their child batches, and the errors by user index. */
export interface WriteExecution<R> {
  readonly replies: ReadonlyArray<{ batch: ChildBatch; reply: R }>;
  /** Sorted by index; at most one per statement. */
  readonly writeErrors: ReadonlyArray<{ index: number; error: ErrorEnvelope }>;
}

/** Runs statements `0..count-1` with the semantics described in the module comment. */
export async function executeWriteBatch<R extends ShardWriteReply>(
  count: number,
  ordered: boolean,
  ports: WriteExecutionPorts<R>,
): Promise<WriteExecution<R>> {
  const replies: Array<{ batch: ChildBatch; reply: R }> = [];
  const errors = new Map<number, ErrorEnvelope>();
  /**
   * The shards that already ran each statement sent to several. Only those need it: a statement
   * sent to one shard is retried only when that shard refused it whole.
   */
  const doneOn = new Map<number, Set<string>>();
  const multiShard = new Set<number>();
  const record = (index: number, error: ErrorEnvelope) => {
    if (!errors.has(index)) errors.set(index, error);
  };
  let pending = Array.from({ length: count }, (_, i) => i);
  for (let round = 0; pending.length > 0; round++) {
    const routing = await ports.route(pending);
    for (const s of routing.statements) if (s.shards.length > 1) multiShard.add(s.index);
    const statements =
      doneOn.size === 0
        ? routing.statements
        : routing.statements.map((s) => ({ index: s.index, shards: s.shards.filter((shard) => !doneOn.get(s.index)?.has(shard)) }));
    const plan = planWriteWaves(statements, routing.routerErrors, ordered);
    const retry = new Set<number>();
    let lastStale: unknown;
    let stopped = false;
    for (const [w, wave] of plan.waves.entries()) {
      const settled = await Promise.allSettled(wave.map((batch) => ports.send(batch)));
      let failed = false;
      for (const [b, outcome] of settled.entries()) {
        const batch = wave[b]!;
        if (outcome.status === 'fulfilled') {
          replies.push({ batch, reply: outcome.value });
          for (const index of batch.indexes) {
            if (!multiShard.has(index)) continue;
            let shards = doneOn.get(index);
            if (shards === undefined) doneOn.set(index, (shards = new Set()));
            shards.add(batch.shard);
          }
          for (const entry of outcome.value.writeErrors) {
            const index = batch.indexes[entry.index];
            if (index === undefined) continue;
            record(index, inUserIndexes(entry.error, index));
            failed = true;
          }
        } else if (ports.handleStale(outcome.reason)) {
          lastStale = outcome.reason;
          for (const index of batch.indexes) retry.add(index);
        } else {
          for (const index of batch.indexes) record(index, envelopeOf(outcome.reason));
          failed = true;
        }
      }
      if (ordered && failed) {
        stopped = true;
        break;
      }
      if (ordered && retry.size > 0) {
        // Everything after the stale child batch waits for the next round, in order.
        for (const later of plan.waves.slice(w + 1)) for (const batch of later) for (const index of batch.indexes) retry.add(index);
        for (const statement of statements) if (statement.index > Math.min(...retry)) retry.add(statement.index);
        for (const error of routing.routerErrors) if (error.index > Math.min(...retry)) retry.add(error.index);
        break;
      }
    }
    if (stopped) break;
    for (const error of plan.routerErrors) if (!retry.has(error.index) && !(ordered && retry.size > 0)) record(error.index, error.error);
    if (ordered && errors.size > 0) break;
    pending = [...retry].sort((a, b) => a - b);
    if (pending.length > 0 && round + 1 >= MAX_STALE_RETRIES) {
      const envelope = envelopeOf(lastStale);
      for (const index of ordered ? pending.slice(0, 1) : pending) record(index, envelope);
      break;
    }
  }
  const writeErrors = [...errors.entries()].sort(([a], [b]) => a - b).map(([index, error]) => ({ index, error }));
  return { replies, writeErrors };
}

/** The wire form of any failure; an unexpected one is `INTERNAL`. */
export function envelopeOf(error: unknown): ErrorEnvelope {
  if (error instanceof TesseraError) return error.toEnvelope();
  return new TesseraError('INTERNAL', `unexpected error: ${error instanceof Error ? error.message : String(error)}`).toEnvelope();
}

/** A shard's error for a statement of a child batch, its details' `index` (the child batch's) made the user's. */
function inUserIndexes(error: ErrorEnvelope, index: number): ErrorEnvelope {
  return error.details !== undefined && 'index' in error.details ? { ...error, details: { ...error.details, index } } : error;
}
