// The router-roll workload: inserts through a pool of every router (router-pool.ts) while someone
// rolls the routers, one at a time: SIGTERM, the router quiesces (its `hello` answers
// ShutdownInProgress while it still serves), stops, starts again. Each VU keeps its own pool and
// its own session; each iteration inserts one document of its own, a retryable write (the VU's
// lsid and the next txnNumber), through the next usable router. A router failure (no answer,
// ShutdownInProgress, the server closing) takes that router out and sends the insert once more
// through the next one, with the same lsid and txnNumber, so an insert that ran before its answer
// was lost is answered from the session's history instead of running twice. The roll is
// invisible to the application when no insert fails and every acknowledged one is stored once.

import { buildDocument } from './documents.ts';
import type { RandomSource } from './keys.ts';
import type { WorkloadOptions } from './options.ts';
import { type VuSession, newVuSession } from './retryable-writes.ts';
import { type PoolEvent, type PoolSend, type RouterPool, newRouterPool, runOnPool } from './router-pool.ts';
import type { Sequence } from './steps.ts';
import { pathOf } from './workloads.ts';

/** A virtual user of router-roll: its pool and its session, both for the whole run. */
export interface RollVu {
  session: VuSession;
  pool: RouterPool;
}

export function newRollVu(options: WorkloadOptions, vuId: number, random: RandomSource): RollVu {
  return { session: newVuSession(vuId, random), pool: newRouterPool(options.routerUrls, options.helloIntervalMs) };
}

/** The document of a VU's iteration: unique in the run, whatever the other VUs do. */
export function rollDocumentId(vuId: number, iteration: number): string {
  return `vu${vuId}-${iteration}`;
}

/** What one iteration came to. */
export interface RollOutcome {
  documentId: string;
  /** The insert was acknowledged. */
  ok: boolean;
  problem?: string;
  /** Sends after the first: the insert met a router going away. */
  retries: number;
  sends: PoolSend[];
  /** The pool's changes during the iteration: routers out (by `hello` or by this insert) and back. */
  events: PoolEvent[];
  hellos: number;
}

/** The insert's last answer: 200, no write error, the one document inserted (a retry answered from history says so too). */
export function judgeInsertAnswer(status: number, body: unknown): { ok: boolean; problem?: string } {
  if (status === 0) return { ok: false, problem: 'no answer' };
  const answer = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>;
  if (status !== 200) return { ok: false, problem: `HTTP ${status}${typeof answer.codeName === 'string' ? ` ${answer.codeName}` : ''}` };
  const writeErrors = answer.writeErrors;
  if (Array.isArray(writeErrors) && writeErrors.length > 0) {
    const first = writeErrors[0] as { codeName?: string; errmsg?: string };
    return { ok: false, problem: `writeError ${first.codeName !== undefined ? first.codeName : String(first.errmsg)}` };
  }
  return answer.insertedCount === 1 ? { ok: true } : { ok: false, problem: `inserted ${String(answer.insertedCount)} of 1` };
}

/**
 * One iteration of a VU: the `hello`s that are due, then the insert of its document through the
 * pool. With `options.retryWrites` the insert is a retryable write and is sent once more after a
 * router failure; without, it carries no session and is sent once, as a driver without retryWrites.
 */
export function* rollIteration(options: WorkloadOptions, vu: RollVu, iteration: number, nowMs: () => number): Sequence<RollOutcome> {
  const documentId = rollDocumentId(vu.session.vuId, iteration);
  const document = buildDocument({ _id: documentId, vu: vu.session.vuId }, options.docBytes, iteration);
  // The txnNumber only ever increases on the session: one write per iteration.
  const body = options.retryWrites ? { documents: [document], lsid: vu.session.lsid, txnNumber: iteration + 1 } : { documents: [document] };
  const result = yield* runOnPool(
    vu.pool,
    { path: pathOf(options.ns, 'insert'), body, name: 'insert' },
    options.retryWrites ? 1 : 0,
    nowMs,
  );
  const verdict =
    result.answer === null ? { ok: false, problem: 'no usable router' } : judgeInsertAnswer(result.answer.status, result.answer.body);
  const outcome: RollOutcome = {
    documentId,
    ok: verdict.ok,
    retries: Math.max(0, result.sends.length - 1),
    sends: result.sends,
    events: result.events,
    hellos: result.hellos,
  };
  if (verdict.problem !== undefined) outcome.problem = verdict.problem;
  return outcome;
}

/** Teardown's count of the documents through the router: every acknowledged insert, once each. */
export function* countRolledDocuments(ns: string): Sequence<number> {
  const answer = yield { kind: 'router', method: 'POST', path: pathOf(ns, 'count'), body: { filter: {} } };
  const n = (typeof answer.body === 'object' && answer.body !== null ? answer.body : {}) as { n?: unknown };
  if (answer.status !== 200 || typeof n.n !== 'number') throw new Error(`count on ${ns} answered ${answer.status}`);
  return n.n;
}

export function formatRollCheck(ns: string, documents: number): string {
  return `tessera: ${ns}: ${documents} documents stored (tessera_documents_inserted counts the acknowledged inserts; the two must be equal)`;
}
