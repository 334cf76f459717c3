// setup() and teardown() as sequences of requests, written once. A sequence is a generator that
// yields what it needs (a GraphQL call, a router call, a pause) and receives the answer; a driver
// performs the requests: synchronously with k6/http in the scripts (loadtests/support/k6-driver.ts),
// asynchronously with fetch in the end-to-end test. So the order of the calls, the retries and the
// waiting are the same code in both, and only the transport differs.

import {
  type BalancerCollectionStatusAnswer,
  type ChangelogAnswer,
  type ChangelogEvent,
  type ClusterBaselineAnswer,
  ControlPlaneError,
  type DistributionAnswer,
  type GraphqlRequest,
  graphqlData,
  graphqlRequest,
} from './graphql.ts';
import { type TeardownReport, computeTeardownReport } from './report.ts';
import type { WorkloadOptions } from './options.ts';
import { type RouterRequest, judgeAnswer } from './workloads.ts';

export type Step =
  | { kind: 'graphql'; request: GraphqlRequest }
  | {
      kind: 'router';
      /** GET sends no body (a router's `hello`); `body` is then null. */
      method: 'POST' | 'GET';
      path: string;
      body: unknown;
      /** The router to send it to; the workload's ROUTER_URL when unset. */
      routerUrl?: string;
      /** Set for the load's own requests (a latency metric tag); setup's and teardown's have none. */
      name?: string;
    }
  | { kind: 'sleep'; ms: number };

/** What a driver hands back: the HTTP status and the parsed JSON body (or the text when it is not JSON). */
export interface StepAnswer {
  status: number;
  body: unknown;
}

export type Sequence<T> = Generator<Step, T, StepAnswer>;

/** What setup() passes to the VUs and to teardown(). */
export interface SetupData {
  ns: string;
  /** The cluster's last event seq once the collection exists: the report counts later events only. */
  startSeq: number;
  /** Shards of the cluster when the run started. */
  shards: string[];
  /** When the load started (the caller's clock, ms since the epoch). */
  startedAtMs: number;
}

export interface CollectionSpec {
  key: Record<string, 1 | 'hashed'>;
  /** For a hashed key: chunks to create up front (default: 2 per shard). */
  numInitialChunks?: number;
}

const KINDS_REPORTED = ['split', 'multi-split', 'moveChunk.commit'];
const BALANCER_KINDS = ['balancer.round', 'balancer.throttle'];
const CHANGELOG_PAGE = 200;
const SETTLE_POLL_MS = 1000;

function* graphql<T>(request: GraphqlRequest): Sequence<T> {
  const answer = yield { kind: 'graphql', request };
  return graphqlData<T>(request.operation, answer.status, answer.body);
}

/**
 * Drops `options.ns` if it exists, then creates and shards it with `spec` and sets its max
 * chunk size to `options.chunkSizeBytes` with balancing on. Each run starts from an empty
 * collection, so its report counts only its own splits and migrations.
 */
export function* setupCollection(options: WorkloadOptions, spec: CollectionSpec, nowMs: () => number): Sequence<SetupData> {
  const db = options.ns.slice(0, options.ns.indexOf('.'));
  try {
    yield* graphql(graphqlRequest('dropCollection', { ns: options.ns }));
  } catch (error) {
    if (!(error instanceof ControlPlaneError && error.code === 'NAMESPACE_NOT_FOUND')) throw error;
  }
  yield* graphql(graphqlRequest('enableSharding', { db }));
  yield* graphql(
    graphqlRequest('shardCollection', {
      input: { ns: options.ns, key: spec.key, ...(spec.numInitialChunks === undefined ? {} : { numInitialChunks: spec.numInitialChunks }) },
    }),
  );
  yield* graphql(
    graphqlRequest('configureCollectionBalancing', { ns: options.ns, chunkSizeBytes: options.chunkSizeBytes, enableBalancing: true }),
  );
  const baseline = yield* graphql<ClusterBaselineAnswer>(graphqlRequest('clusterBaseline'));
  return {
    ns: options.ns,
    startSeq: baseline.cluster.lastEventSeq,
    shards: baseline.cluster.shards.map((s) => s.name),
    startedAtMs: nowMs(),
  };
}

/** How many shards the cluster has (insert-hashed pre-splits into 2 chunks per shard). */
export function* clusterShardCount(): Sequence<number> {
  return (yield* graphql<ClusterBaselineAnswer>(graphqlRequest('clusterBaseline'))).cluster.shards.length;
}

/** Sends router requests one after the other (crud-mix's seed documents); throws on the first that fails. */
export function* sendAll(requests: RouterRequest[]): Sequence<number> {
  let sent = 0;
  for (const request of requests) {
    const answer = yield { kind: 'router', method: request.method, path: request.path, body: request.body };
    const verdict = judgeAnswer(request, answer.status, answer.body);
    if (!verdict.ok) throw new Error(`${request.name} ${request.path} failed: ${verdict.problem ?? 'unknown'}`);
    sent++;
  }
  return sent;
}

/** Adds a shard (add-shard-under-load). The mutation is idempotent for the same name and URL. */
export function* addShard(name: string, url: string): Sequence<{ name: string; state: string }> {
  const answer = yield* graphql<{ addShard: { name: string; state: string } }>(graphqlRequest('addShard', { name, url }));
  return answer.addShard;
}

/**
 * Every changelog event after `startSeq`, following the pages: of `ns` of the reported kinds, or
 * with `ns` null the balancer's rounds and load throttle changes (which name no collection).
 */
export function* changelogSince(ns: string | null, startSeq: number): Sequence<ChangelogEvent[]> {
  const events: ChangelogEvent[] = [];
  let after: string | null = String(startSeq);
  while (after !== null) {
    const page: ChangelogAnswer = yield* graphql<ChangelogAnswer>(
      ns === null
        ? graphqlRequest('balancerChangelog', { kinds: BALANCER_KINDS, after, first: CHANGELOG_PAGE })
        : graphqlRequest('changelog', { ns, kinds: KINDS_REPORTED, after, first: CHANGELOG_PAGE }),
    );
    events.push(...page.changelog.nodes);
    after = page.changelog.pageInfo.hasNextPage ? page.changelog.pageInfo.endCursor : null;
  }
  return events;
}

/** balancerCollectionStatus, or null where the control plane does not have it (an older config server). */
function* complianceOf(ns: string): Sequence<BalancerCollectionStatusAnswer['balancerCollectionStatus'] | null> {
  try {
    return (yield* graphql<BalancerCollectionStatusAnswer>(graphqlRequest('balancerCollectionStatus', { ns }))).balancerCollectionStatus;
  } catch (error) {
    if (error instanceof ControlPlaneError && (error.code === 'GRAPHQL_VALIDATION_FAILED' || error.code === 'BAD_VALUE')) return null;
    throw error;
  }
}

export interface SettleGoal {
  /** Wait until the balancer calls the collection compliant. */
  compliant?: boolean;
  /** Wait until this shard owns at least one chunk of the collection. */
  shardHoldsChunks?: string;
}

/**
 * What teardown() reports: waits up to `options.settleMs` for `goal` (polling once a second),
 * then reads the distribution, the splits and migrations since setup, and the balancer's verdict.
 */
export function* collectReport(
  options: WorkloadOptions,
  setup: SetupData,
  goal: SettleGoal,
  nowMs: () => number,
): Sequence<TeardownReport> {
  const loadEndedAtMs = nowMs();
  const polls = Math.ceil(options.settleMs / SETTLE_POLL_MS);
  let settledAfterMs: number | null = null;
  for (let poll = 0; poll <= polls && (goal.compliant === true || goal.shardHoldsChunks !== undefined); poll++) {
    if (yield* isSettled(setup.ns, goal)) {
      settledAfterMs = nowMs() - loadEndedAtMs;
      break;
    }
    if (poll < polls) yield { kind: 'sleep', ms: SETTLE_POLL_MS };
  }
  const distribution = yield* graphql<DistributionAnswer>(graphqlRequest('distribution', { ns: setup.ns }));
  const events = yield* changelogSince(setup.ns, setup.startSeq);
  const balancerEvents = yield* changelogSince(null, setup.startSeq);
  const compliance = yield* complianceOf(setup.ns);
  return computeTeardownReport({
    ns: setup.ns,
    shards: distribution.cluster.shards.map((s) => s.name),
    distribution: distribution.collection.distribution,
    events,
    balancerEvents,
    compliance,
    startedAtMs: setup.startedAtMs,
    loadEndedAtMs,
    settledAfterMs,
    watchedShard: goal.shardHoldsChunks ?? null,
  });
}

function* isSettled(ns: string, goal: SettleGoal): Sequence<boolean> {
  if (goal.shardHoldsChunks !== undefined) {
    const answer = yield* graphql<DistributionAnswer>(graphqlRequest('distribution', { ns }));
    const held = answer.collection.distribution.find((d) => d.shard === goal.shardHoldsChunks)?.chunks ?? 0;
    if (held === 0) return false;
  }
  if (goal.compliant === true) {
    const compliance = yield* complianceOf(ns);
    if (compliance !== null && !compliance.balancerCompliant) return false;
  }
  return true;
}
