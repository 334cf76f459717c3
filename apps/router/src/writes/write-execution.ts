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
  const run = new WriteBatchRun(ordered, ports);
  let pending = Array.from({ length: count }, (_, i) => i);
  for (let round = 0; pending.length > 0; round++) {
    const outcome = await run.round(pending);
    if (outcome.stopped) break;
    pending = outcome.retry;
    if (pending.length > 0 && round + 1 >= MAX_STALE_RETRIES) {
      const envelope = envelopeOf(outcome.lastStale);
      for (const index of ordered ? pending.slice(0, 1) : pending) run.record(index, envelope);
      break;
    }
  }
  return run.result();
}

/** One write batch's progress across its rounds: replies, errors by user index, and where multi-shard statements ran. */
class WriteBatchRun<R extends ShardWriteReply> {
  private readonly replies: Array<{ batch: ChildBatch; reply: R }> = [];
  private readonly errors = new Map<number, ErrorEnvelope>();
  /**
   * The shards that already ran each statement sent to several. Only those need it: a statement
   * sent to one shard is retried only when that shard refused it whole.
   */
  private readonly doneOn = new Map<number, Set<string>>();
  private readonly multiShard = new Set<number>();

  constructor(
    private readonly ordered: boolean,
    private readonly ports: WriteExecutionPorts<R>,
  ) {}

  /** The first error of a statement is its error. */
  record(index: number, error: ErrorEnvelope): void {
    if (!this.errors.has(index)) this.errors.set(index, error);
  }

  /**
   * Routes and sends `pending` in waves; answers the statements to send again in the next round
   * (sorted), the last stale-routing error, and whether the batch stopped (an ordered batch's error).
   */
  async round(pending: readonly number[]): Promise<{ retry: number[]; lastStale: unknown; stopped: boolean }> {
    const { ordered } = this;
    const routing = await this.ports.route(pending);
    for (const s of routing.statements) if (s.shards.length > 1) this.multiShard.add(s.index);
    const statements =
      this.doneOn.size === 0
        ? routing.statements
        : routing.statements.map((s) => ({ index: s.index, shards: s.shards.filter((shard) => !this.doneOn.get(s.index)?.has(shard)) }));
    const plan = planWriteWaves(statements, routing.routerErrors, ordered);
    const retry = new Set<number>();
    let lastStale: unknown;
    for (const [w, wave] of plan.waves.entries()) {
      const outcome = await this.sendWave(wave, retry);
      lastStale = outcome.lastStale ?? lastStale;
      if (ordered && outcome.failed) return { retry: [], lastStale, stopped: true };
      if (ordered && retry.size > 0) {
        // Everything after the stale child batch waits for the next round, in order.
        const first = Math.min(...retry);
        for (const later of plan.waves.slice(w + 1)) for (const batch of later) for (const index of batch.indexes) retry.add(index);
        for (const statement of statements) if (statement.index > first) retry.add(statement.index);
        for (const error of routing.routerErrors) if (error.index > first) retry.add(error.index);
        break;
      }
    }
    for (const error of plan.routerErrors)
      if (!retry.has(error.index) && !(ordered && retry.size > 0)) this.record(error.index, error.error);
    if (ordered && this.errors.size > 0) return { retry: [], lastStale, stopped: true };
    return { retry: [...retry].sort((a, b) => a - b), lastStale, stopped: false };
  }

  /** Sends one wave's child batches together; stale ones go to `retry`. Answers whether a statement failed. */
  private async sendWave(wave: readonly ChildBatch[], retry: Set<number>): Promise<{ failed: boolean; lastStale: unknown }> {
    const settled = await Promise.allSettled(wave.map((batch) => this.ports.send(batch)));
    let failed = false;
    let lastStale: unknown;
    for (const [b, outcome] of settled.entries()) {
      const batch = wave[b]!;
      if (outcome.status === 'fulfilled') {
        if (this.absorbReply(batch, outcome.value)) failed = true;
      } else if (this.ports.handleStale(outcome.reason)) {
        lastStale = outcome.reason;
        for (const index of batch.indexes) retry.add(index);
      } else {
        for (const index of batch.indexes) this.record(index, envelopeOf(outcome.reason));
        failed = true;
      }
    }
    return { failed, lastStale };
  }

  /** Keeps a shard's reply and notes where multi-shard statements ran; answers whether it holds a write error. */
  private absorbReply(batch: ChildBatch, reply: R): boolean {
    this.replies.push({ batch, reply });
    for (const index of batch.indexes) {
      if (!this.multiShard.has(index)) continue;
      let shards = this.doneOn.get(index);
      if (shards === undefined) this.doneOn.set(index, (shards = new Set()));
      shards.add(batch.shard);
    }
    let failed = false;
    for (const entry of reply.writeErrors) {
      const index = batch.indexes[entry.index];
      if (index === undefined) continue;
      this.record(index, inUserIndexes(entry.error, index));
      failed = true;
    }
    return failed;
  }

  result(): WriteExecution<R> {
    const writeErrors = [...this.errors.entries()].sort(([a], [b]) => a - b).map(([index, error]) => ({ index, error }));
    return { replies: this.replies, writeErrors };
  }
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
