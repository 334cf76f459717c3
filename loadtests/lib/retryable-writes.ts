// The retryable-writes workload: each virtual user holds one logical session (an id it makes up)
// and numbers its writes with an increasing txnNumber, as a driver does. Each iteration inserts
// one document of its own ({ _id, n: 0 }) and applies one `$inc: { n: 1 }` to it, both retryable
// writes; a random share of them is sent a second time with the same lsid and txnNumber through
// another router, and that second answer must be the first one, answered from the session's
// history. Every document then gets exactly one `$inc` however often it was sent, so teardown
// finds a doubled write as a document with n > 1, and nothing else can make one.

import { buildDocument } from './documents.ts';
import type { RandomSource } from './keys.ts';
import type { WorkloadOptions } from './options.ts';
import type { Sequence, StepAnswer } from './steps.ts';
import { pathOf } from './workloads.ts';

/** How many `$inc`s each document gets: one per iteration, so a correct run leaves every n at 1. */
export const INCS_PER_DOCUMENT = 1;
/** An iteration's writes (the insert, then the `$inc`): each takes the session's next txnNumber. */
export const WRITES_PER_ITERATION = 2;

/** MongoDB's session id as the router's Extended JSON takes it. */
export interface LogicalSessionId {
  id: { $uuid: string };
}

/** A virtual user's session: made up by the user, one per VU for the whole run. */
export interface VuSession {
  vuId: number;
  lsid: LogicalSessionId;
}

/** A version 4 UUID from `random` (k6 has no crypto.randomUUID in every version; the tests seed it). */
export function randomUuid(random: RandomSource): string {
  const hex = (n: number) => {
    let text = '';
    for (let i = 0; i < n; i++) text += Math.floor(random() * 16).toString(16);
    return text;
  };
  const variant = (8 + Math.floor(random() * 4)).toString(16);
  return `${hex(8)}-${hex(4)}-4${hex(3)}-${variant}${hex(3)}-${hex(12)}`;
}

export function newVuSession(vuId: number, random: RandomSource): VuSession {
  return { vuId, lsid: { id: { $uuid: randomUuid(random) } } };
}

/**
 * The txnNumber of write `write` (0: the insert, 1: the `$inc`) of the VU's iteration
 * `iteration`: 1, 2, 3, ... over the VU's iterations, so it only ever increases on the session
 * (a lower one would be refused as TransactionTooOld).
 */
export function txnNumberOf(iteration: number, write: number): number {
  return iteration * WRITES_PER_ITERATION + write + 1;
}

/** The document of a VU's iteration: unique in the run, whatever the other VUs do. */
export function retryableDocumentId(vuId: number, iteration: number): string {
  return `vu${vuId}-${iteration}`;
}

/**
 * The routers of a VU's write: the first send takes turns over the routers (by VU, iteration and
 * write, so every router gets both kinds of write), and the retry goes to the next one, so with
 * two routers or more a retry never goes through the router that answered the first send.
 */
export function routersOf(routerUrls: readonly string[], vuId: number, iteration: number, write: number): { first: string; retry: string } {
  const turn = vuId + iteration + write;
  const at = (i: number) => routerUrls[i % routerUrls.length] as string;
  return { first: at(turn), retry: at(turn + 1) };
}

export type RetryableOp = 'insert' | 'update';

/** What one send of an iteration came to: the op tag (`insert retry` for a second send) and the verdict. */
export interface SendVerdict {
  op: 'insert' | 'update' | 'insert retry' | 'update retry';
  ok: boolean;
  problem?: string;
}

export interface IterationOutcome {
  sends: SendVerdict[];
  /** Documents the run may count on: the insert was acknowledged. */
  inserted: number;
  retriesSent: number;
  /** Retries answered with every statement in retriedStmtIds and the first answer's counts. */
  retriesFromHistory: number;
}

type Answer = Record<string, unknown>;

function asAnswer(body: unknown): Answer {
  return typeof body === 'object' && body !== null ? (body as Answer) : {};
}

function firstProblem(status: number, answer: Answer): string | undefined {
  if (status !== 200) return `HTTP ${status} ${typeof answer.codeName === 'string' ? answer.codeName : ''}`.trim();
  const writeErrors = answer.writeErrors;
  if (Array.isArray(writeErrors) && writeErrors.length > 0) {
    const first = writeErrors[0] as { codeName?: string; errmsg?: string };
    return `writeError ${first.codeName ?? first.errmsg ?? ''}`.trim();
  }
  return undefined;
}

/** The first answer to a one-statement write: 200, no write error, and the one document inserted or matched. */
export function judgeFirstAnswer(op: RetryableOp, status: number, body: unknown): SendVerdict {
  const answer = asAnswer(body);
  const problem = firstProblem(status, answer);
  if (problem !== undefined) return { op, ok: false, problem };
  const count = op === 'insert' ? answer.insertedCount : answer.matchedCount;
  return count === 1 ? { op, ok: true } : { op, ok: false, problem: `${op === 'insert' ? 'inserted' : 'matched'} ${String(count)} of 1` };
}

/** The answer fields a retry must repeat. */
const COUNT_FIELDS = ['insertedCount', 'matchedCount', 'modifiedCount', 'upsertedCount', 'deletedCount'];

/**
 * A retry's answer: what the first execution answered (the same counts, no write error) with
 * every statement of the command, here the one statement 0, in `retriedStmtIds`. Anything else
 * means the write may have run twice, or not at all.
 */
export function judgeRetryAnswer(op: RetryableOp, first: unknown, status: number, body: unknown): SendVerdict & { fromHistory: boolean } {
  const tag = op === 'insert' ? 'insert retry' : 'update retry';
  const answer = asAnswer(body);
  const problem = firstProblem(status, answer);
  if (problem !== undefined) return { op: tag, ok: false, problem, fromHistory: false };
  const retried = answer.retriedStmtIds;
  const fromHistory = Array.isArray(retried) && retried.length === 1 && retried[0] === 0;
  const expected = asAnswer(first);
  const differs = COUNT_FIELDS.filter((field) => (field in expected || field in answer) && expected[field] !== answer[field]);
  if (differs.length > 0)
    return {
      op: tag,
      ok: false,
      problem: `answered ${differs.map((f) => `${f} ${String(answer[f])}`).join(', ')}, first ${differs.map((f) => String(expected[f])).join(', ')}`,
      fromHistory,
    };
  if (!fromHistory)
    return { op: tag, ok: false, problem: `not answered from history (retriedStmtIds ${JSON.stringify(retried)})`, fromHistory };
  return { op: tag, ok: true, fromHistory };
}

/** Sends one retryable write, and a random share of the time sends it again through the other router. */
function* sendRetryable(
  options: WorkloadOptions,
  session: VuSession,
  op: RetryableOp,
  command: Answer,
  iteration: number,
  write: number,
  random: RandomSource,
  outcome: IterationOutcome,
): Sequence<boolean> {
  const path = pathOf(options.ns, op);
  const body = { ...command, lsid: session.lsid, txnNumber: txnNumberOf(iteration, write) };
  const routers = routersOf(options.routerUrls, session.vuId, iteration, write);
  const first: StepAnswer = yield { kind: 'router', method: 'POST', path, body, routerUrl: routers.first, name: op };
  const verdict = judgeFirstAnswer(op, first.status, first.body);
  outcome.sends.push(verdict);
  if (!verdict.ok || random() >= options.retryRate) return verdict.ok;
  const retry: StepAnswer = yield { kind: 'router', method: 'POST', path, body, routerUrl: routers.retry, name: `${op} retry` };
  const retryVerdict = judgeRetryAnswer(op, first.body, retry.status, retry.body);
  outcome.retriesSent++;
  if (retryVerdict.fromHistory) outcome.retriesFromHistory++;
  outcome.sends.push({
    op: retryVerdict.op,
    ok: retryVerdict.ok,
    ...(retryVerdict.problem === undefined ? {} : { problem: retryVerdict.problem }),
  });
  return verdict.ok;
}

/**
 * One iteration of a VU: insert its document, then `$inc` it, each a retryable write with the
 * session's next txnNumber. The `$inc` is sent only when the insert was acknowledged, so a failed
 * insert counts once in the errors rather than twice.
 */
export function* retryableWritesIteration(
  options: WorkloadOptions,
  session: VuSession,
  iteration: number,
  random: RandomSource,
): Sequence<IterationOutcome> {
  const outcome: IterationOutcome = { sends: [], inserted: 0, retriesSent: 0, retriesFromHistory: 0 };
  const _id = retryableDocumentId(session.vuId, iteration);
  const document = buildDocument({ _id, vu: session.vuId, n: 0 }, options.docBytes, iteration);
  const insert = { documents: [document] };
  if (!(yield* sendRetryable(options, session, 'insert', insert, iteration, 0, random, outcome))) return outcome;
  outcome.inserted = 1;
  const update = { updates: [{ q: { _id }, u: { $inc: { n: 1 } } }] };
  yield* sendRetryable(options, session, 'update', update, iteration, 1, random, outcome);
  return outcome;
}

/** What teardown finds: every document of the run, those with more `$inc`s applied than sent once, and those with fewer. */
export interface WriteCheck {
  documents: number;
  /** n above INCS_PER_DOCUMENT: a write applied twice. Must be 0. */
  doubled: number;
  /** n below: an `$inc` never applied, which only a failed (counted) `$inc` may explain. */
  unapplied: number;
}

function* countWhere(ns: string, filter: Answer): Sequence<number> {
  const answer = yield { kind: 'router', method: 'POST', path: pathOf(ns, 'count'), body: { filter } };
  const n = asAnswer(answer.body).n;
  if (answer.status !== 200 || typeof n !== 'number') throw new Error(`count ${JSON.stringify(filter)} on ${ns} answered ${answer.status}`);
  return n;
}

/** Teardown's check, three counts through the router: documents, documents with n too high, too low. */
export function* checkRetryableWrites(ns: string): Sequence<WriteCheck> {
  const documents = yield* countWhere(ns, {});
  const doubled = yield* countWhere(ns, { n: { $gt: INCS_PER_DOCUMENT } });
  const unapplied = yield* countWhere(ns, { n: { $lt: INCS_PER_DOCUMENT } });
  return { documents, doubled, unapplied };
}

/** The check as teardown's Gauges (part of REPORT_METRICS, so the summary picks them up). */
export function writeCheckMetrics(check: WriteCheck): {
  tessera_documents: number;
  tessera_doubled_writes: number;
  tessera_unapplied_incs: number;
} {
  return { tessera_documents: check.documents, tessera_doubled_writes: check.doubled, tessera_unapplied_incs: check.unapplied };
}

export function formatWriteCheck(ns: string, check: WriteCheck): string {
  return `tessera: ${ns}: ${check.documents} documents, ${check.doubled} with a write applied twice, ${check.unapplied} with their $inc not applied`;
}
