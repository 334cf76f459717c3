// A client of several routers, as a MongoDB driver treats a mongos list (the Server Discovery and
// Monitoring and Server Selection specifications, cut down to a pool of routers). It keeps each
// router's last `hello` outcome, sends each operation to the next router that answered `hello`,
// and takes a router out on the signals a router gives before and while it goes away: `hello`
// answering ShutdownInProgress (quiesce mode: the router still serves what it is sent, but wants
// nothing new), and an operation that got no answer or was refused as shutting down. An out
// router is asked `hello` again after a back-off and comes back when it answers.
//
// The pool is plain data a VU keeps for the whole run and that these functions change in place;
// time comes in as the caller's clock, and the requests go out as steps (steps.ts) that a driver
// sends. Plain ES2017 apart from the types, so any k6 runs it as it is.

import type { Sequence, Step, StepAnswer } from './steps.ts';

export const HELLO_PATH = '/v1/hello';
/**
 * The cap of an out router's back-off. A restarted router must be back in the pool before the
 * next router of a roll leaves it, or the pool has no router to send to until it is.
 */
export const MAX_OUT_BACKOFF_MS = 1000;
/** How long an operation waits for a usable router before it fails: a driver's serverSelectionTimeoutMS. */
export const SERVER_SELECTION_TIMEOUT_MS = 30000;

/** Why a router is out: a refusal's codeName, or one of these. */
export const UNREACHABLE = 'unreachable';
/** A 503 without a codeName: the router's HTTP server is closing and did not run the request. */
export const CLOSING = 'closing';
export const SHUTDOWN_IN_PROGRESS = 'ShutdownInProgress';

/** MongoDB's topologyVersion: the router process and a counter it raises on a change clients must notice. */
export interface TopologyVersion {
  processId: string;
  counter: number;
}

export interface RouterHealth {
  url: string;
  /** Its last `hello` answered 200, and no operation has taken it out since. */
  usable: boolean;
  /** When `hello` was last asked, or the router taken out (the caller's clock); null before the first `hello`. */
  checkedAtMs: number | null;
  /** Checks in a row that did not find it usable; its back-off grows with them. */
  failedChecks: number;
  /** Why it is out; null while usable and before the first `hello`. */
  outReason: string | null;
  /** The newest topologyVersion it gave, in a `hello` answer or a ShutdownInProgress refusal. */
  topologyVersion: TopologyVersion | null;
}

export interface RouterPool {
  routers: RouterHealth[];
  /** A usable router's `hello` is asked again this long after the last one. */
  helloIntervalMs: number;
  /** Where the round robin goes on from. */
  turn: number;
}

/** What a change of the pool was: a router taken out (by its `hello` or by an operation's failure), or back in. */
export type PoolEvent =
  | { kind: 'out'; routerUrl: string; reason: string; via: 'hello' | 'operation'; topologyVersion: TopologyVersion | null }
  | { kind: 'in'; routerUrl: string; topologyVersion: TopologyVersion | null };

/** A pool of `urls`, none usable until its first `hello` answers. */
export function newRouterPool(urls: readonly string[], helloIntervalMs: number): RouterPool {
  return {
    routers: urls.map((url) => ({ url, usable: false, checkedAtMs: null, failedChecks: 0, outReason: null, topologyVersion: null })),
    helloIntervalMs,
    turn: 0,
  };
}

type Answer = Record<string, unknown>;

function asAnswer(body: unknown): Answer {
  return typeof body === 'object' && body !== null ? (body as Answer) : {};
}

function topologyVersionOf(value: unknown): TopologyVersion | null {
  const version = asAnswer(value);
  return typeof version.processId === 'string' && typeof version.counter === 'number'
    ? { processId: version.processId, counter: version.counter }
    : null;
}

/** The topologyVersion of an answer: a `hello`'s own, or a refusal's under `details`. */
function answerTopologyVersion(answer: Answer): TopologyVersion | null {
  const own = topologyVersionOf(answer.topologyVersion);
  return own !== null ? own : topologyVersionOf(asAnswer(answer.details).topologyVersion);
}

export type HelloOutcome =
  { usable: true; topologyVersion: TopologyVersion | null } | { usable: false; reason: string; topologyVersion: TopologyVersion | null };

/**
 * A `hello` answer. Usable is a 200 that says the router takes writes; quiesce mode answers 503
 * ShutdownInProgress with a raised topologyVersion; no answer at all is `unreachable`.
 */
export function judgeHello(status: number, body: unknown): HelloOutcome {
  if (status === 0) return { usable: false, reason: UNREACHABLE, topologyVersion: null };
  const answer = asAnswer(body);
  const topologyVersion = answerTopologyVersion(answer);
  if (status === 200)
    return answer.isWritablePrimary === true
      ? { usable: true, topologyVersion }
      : { usable: false, reason: 'notWritablePrimary', topologyVersion };
  return { usable: false, reason: typeof answer.codeName === 'string' ? answer.codeName : `HTTP ${status}`, topologyVersion };
}

/**
 * Whether an operation's answer says its router can take nothing now, so the operation may go to
 * another router: the reason, or null for an answer the router owns (success, or an error such as
 * DuplicateKey that any router would give). No answer, ShutdownInProgress and a 503 without a
 * codeName qualify; the API answers every error of its own with a codeName, so a bare 503 is the
 * HTTP server refusing work while it closes.
 */
export function routerFailureOf(status: number, body: unknown): string | null {
  if (status === 0) return UNREACHABLE;
  const codeName = asAnswer(body).codeName;
  if (codeName === SHUTDOWN_IN_PROGRESS) return SHUTDOWN_IN_PROGRESS;
  if (status === 503 && codeName === undefined) return CLOSING;
  return null;
}

/**
 * Whether `seen` is older than what the pool has for the router: the same process with a lower
 * counter, an answer sent before the one already recorded. A driver ignores such an answer.
 */
export function isStale(current: TopologyVersion | null, seen: TopologyVersion | null): boolean {
  return current !== null && seen !== null && seen.processId === current.processId && seen.counter < current.counter;
}

function routerOf(pool: RouterPool, url: string): RouterHealth {
  for (const router of pool.routers) if (router.url === url) return router;
  throw new Error(`${url} is not a router of the pool`);
}

/** How long an out router waits for its next `hello`: the interval, doubled per failed check, capped. */
export function outBackoffMs(failedChecks: number, helloIntervalMs: number): number {
  const doubled = helloIntervalMs * Math.pow(2, Math.max(0, failedChecks - 1));
  return Math.max(helloIntervalMs, Math.min(doubled, MAX_OUT_BACKOFF_MS));
}

/** When the router's next `hello` is due (the caller's clock). */
export function nextHelloAtMs(pool: RouterPool, router: RouterHealth): number {
  if (router.checkedAtMs === null) return Number.NEGATIVE_INFINITY;
  return router.checkedAtMs + (router.usable ? pool.helloIntervalMs : outBackoffMs(router.failedChecks, pool.helloIntervalMs));
}

/** The routers whose `hello` is due at `nowMs`, in pool order. */
export function routersDueForHello(pool: RouterPool, nowMs: number): string[] {
  return pool.routers.filter((router) => nextHelloAtMs(pool, router) <= nowMs).map((router) => router.url);
}

/** Records a `hello` outcome; answers the change it made, or null (no change, or a stale answer). */
export function recordHello(pool: RouterPool, url: string, outcome: HelloOutcome, nowMs: number): PoolEvent | null {
  const router = routerOf(pool, url);
  router.checkedAtMs = nowMs;
  if (isStale(router.topologyVersion, outcome.topologyVersion)) return null;
  if (outcome.topologyVersion !== null) router.topologyVersion = outcome.topologyVersion;
  if (outcome.usable) {
    const wasOut = router.outReason !== null;
    router.usable = true;
    router.failedChecks = 0;
    router.outReason = null;
    return wasOut ? { kind: 'in', routerUrl: url, topologyVersion: outcome.topologyVersion } : null;
  }
  router.failedChecks++;
  const changed = router.outReason !== outcome.reason;
  router.usable = false;
  router.outReason = outcome.reason;
  return changed ? { kind: 'out', routerUrl: url, reason: outcome.reason, via: 'hello', topologyVersion: outcome.topologyVersion } : null;
}

/**
 * Takes a router out after an operation's failure (`routerFailureOf`), until a `hello` finds it
 * usable again; answers the change, or null when it was out already.
 */
export function takeOut(
  pool: RouterPool,
  url: string,
  reason: string,
  nowMs: number,
  topologyVersion: TopologyVersion | null,
): PoolEvent | null {
  const router = routerOf(pool, url);
  if (!router.usable) return null;
  router.usable = false;
  router.outReason = reason;
  router.checkedAtMs = nowMs;
  router.failedChecks = 1;
  if (topologyVersion !== null && !isStale(router.topologyVersion, topologyVersion)) router.topologyVersion = topologyVersion;
  return { kind: 'out', routerUrl: url, reason, via: 'operation', topologyVersion };
}

/** The next usable router after the last one picked (round robin), or null when none is usable. */
export function selectRouter(pool: RouterPool): string | null {
  const n = pool.routers.length;
  for (let i = 0; i < n; i++) {
    const at = (pool.turn + i) % n;
    const router = pool.routers[at] as RouterHealth;
    if (router.usable) {
      pool.turn = (at + 1) % n;
      return router.url;
    }
  }
  return null;
}

function helloStep(routerUrl: string): Step {
  return { kind: 'router', method: 'GET', path: HELLO_PATH, body: null, routerUrl, name: 'hello' };
}

/** What the pool did while it checked routers and picked one. */
export interface PoolActivity {
  events: PoolEvent[];
  hellos: number;
}

/** Asks `hello` of every router that is due, one after the other, and records the outcomes. */
export function* checkRouters(pool: RouterPool, nowMs: () => number, activity: PoolActivity): Sequence<void> {
  for (const url of routersDueForHello(pool, nowMs())) {
    const answer: StepAnswer = yield helloStep(url);
    activity.hellos++;
    const event = recordHello(pool, url, judgeHello(answer.status, answer.body), nowMs());
    if (event !== null) activity.events.push(event);
  }
}

/**
 * Server selection: the next usable router, after the `hello`s that are due. While none is usable
 * it waits for the next due `hello` and asks again, up to SERVER_SELECTION_TIMEOUT_MS; then null.
 */
export function* selectRouterWaiting(pool: RouterPool, nowMs: () => number, activity: PoolActivity): Sequence<string | null> {
  const startedMs = nowMs();
  for (;;) {
    yield* checkRouters(pool, nowMs, activity);
    const url = selectRouter(pool);
    if (url !== null) return url;
    const now = nowMs();
    if (now - startedMs >= SERVER_SELECTION_TIMEOUT_MS) return null;
    let dueMs = Number.POSITIVE_INFINITY;
    for (const router of pool.routers) dueMs = Math.min(dueMs, nextHelloAtMs(pool, router));
    yield { kind: 'sleep', ms: Math.max(1, Math.min(dueMs - now, SERVER_SELECTION_TIMEOUT_MS)) };
  }
}

/** An operation for the pool: one POST, sent to whichever router the pool picks. */
export interface PoolOperation {
  path: string;
  body: unknown;
  /** The latency tag of its first send; a send after a router failure is tagged `<name> retry`. */
  name: string;
}

export interface PoolSend {
  routerUrl: string;
  status: number;
  /** The router failure that took the router out (`routerFailureOf`), or null. */
  failure: string | null;
}

export interface PoolResult extends PoolActivity {
  /** The answer the operation ended with; null when no router was usable within SERVER_SELECTION_TIMEOUT_MS. */
  answer: StepAnswer | null;
  sends: PoolSend[];
}

/**
 * Runs one operation on the pool: picks a router, sends, and on a router failure takes that router
 * out and sends again through the next router, at most `retries` times. Only a router failure is
 * sent again: any other answer, an error included, is the operation's. Sending again is safe only
 * for an operation whose second execution cannot apply twice (a retryable write).
 */
export function* runOnPool(pool: RouterPool, operation: PoolOperation, retries: number, nowMs: () => number): Sequence<PoolResult> {
  const result: PoolResult = { answer: null, sends: [], events: [], hellos: 0 };
  for (let attempt = 0; ; attempt++) {
    const routerUrl = yield* selectRouterWaiting(pool, nowMs, result);
    if (routerUrl === null) return result;
    const answer: StepAnswer = yield {
      kind: 'router',
      method: 'POST',
      path: operation.path,
      body: operation.body,
      routerUrl,
      name: attempt === 0 ? operation.name : `${operation.name} retry`,
    };
    const failure = routerFailureOf(answer.status, answer.body);
    result.answer = answer;
    result.sends.push({ routerUrl, status: answer.status, failure });
    if (failure === null) return result;
    const event = takeOut(pool, routerUrl, failure, nowMs(), answerTopologyVersion(asAnswer(answer.body)));
    if (event !== null) result.events.push(event);
    if (attempt >= retries) return result;
  }
}
