import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type IterationOutcome,
  type Sequence,
  type SetupData,
  type WorkloadOptions,
  checkRetryableWrites,
  collectionSpecOf,
  newVuSession,
  parseWorkloadOptions,
  retryableWritesIteration,
  seededRandom,
  setupCollection,
} from '../../loadtests/lib/index.ts';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';
import { type RouterStep, runSequence, sendToRouter } from './k6-sequence-driver.js';
import { FAST_CONFIG_ENV, waitForLeader } from './helpers.js';
import { startTestCluster } from './test-cluster.js';

// The retryable-writes workload's logic (loadtests/lib/retryable-writes.ts) driven from Node
// against two real routers: the same iterations the k6 script runs, each VU with its own session,
// retries sent through the other router, and teardown's check of the documents. Then the same
// load from a client that loses its session before retrying, which must make teardown's check
// fail: a check that cannot see a doubled write would prove nothing.

/** How a client sends a step: as the workload builds it, or changed (the broken client below). */
type Rewrite = (step: RouterStep) => RouterStep;

let cluster: LocalCluster;
let dispose: () => Promise<void>;
let options: WorkloadOptions;

beforeAll(async () => {
  ({ cluster, dispose } = await startTestCluster({ shards: 2, routers: 2, env: FAST_CONFIG_ENV }));
  await waitForLeader(cluster.configClient());
  options = parseWorkloadOptions('retryable-writes', {
    ROUTER_URL: cluster.routerUrls[0],
    ROUTER_URLS: cluster.routerUrls.join(','),
    CONFIG_URL: cluster.configUrl,
    ADMIN_TOKEN: cluster.controlPlaneTokens.admin,
    API_KEY: cluster.rootKey,
    DOC_BYTES: '256',
    RETRY_RATE: '0.5',
    VUS: '4',
  });
});

afterAll(async () => {
  await dispose?.();
});

/** The Node driver of a lib sequence (see k6-sequence-driver.ts), recording each router step it sends. */
function run<T>(sequence: Sequence<T>, sent: RouterStep[] = [], rewrite: Rewrite = (step) => step): Promise<T> {
  return runSequence(options, sequence, (step) => {
    const sending = rewrite(step);
    sent.push(sending);
    return sendToRouter(options, sending);
  });
}

/**
 * The k6 scenario: `settings.vus` VUs side by side, each with its own session, `iterations`
 * iterations each. Sessions come from `seed`: a run that reused another run's sessions would have
 * its writes answered from that run's history, as it should.
 */
async function runVus(
  settings: WorkloadOptions,
  seed: number,
  iterations: number,
  rewrite?: Rewrite,
): Promise<{ outcomes: IterationOutcome[]; sent: RouterStep[]; ms: number }> {
  const started = Date.now();
  const outcomes: IterationOutcome[] = [];
  const sent: RouterStep[] = [];
  await Promise.all(
    Array.from({ length: settings.vus }, async (_, i) => {
      const vuId = i + 1;
      const random = seededRandom(seed + vuId);
      const session = newVuSession(vuId, random);
      for (let iteration = 0; iteration < iterations; iteration++)
        outcomes.push(await run(retryableWritesIteration(settings, session, iteration, random), sent, rewrite));
    }),
  );
  return { outcomes, sent, ms: Date.now() - started };
}

const total = (outcomes: IterationOutcome[], field: 'inserted' | 'retriesSent' | 'retriesFromHistory') =>
  outcomes.reduce((sum, o) => sum + o[field], 0);
const failures = (outcomes: IterationOutcome[]) => outcomes.flatMap((o) => o.sends.filter((s) => !s.ok));

describe('the retryable-writes workload against two routers', () => {
  const ITERATIONS = 25;
  let setup: SetupData;

  it('retries through the other router are answered from history, and teardown finds every document written once', async () => {
    setup = await run(setupCollection(options, collectionSpecOf('retryable-writes', 2), () => Date.now()));
    const load = await runVus(options, 1000, ITERATIONS);
    const retries = load.sent.filter((s) => s.name?.endsWith(' retry'));
    const check = await run(checkRetryableWrites(setup.ns));
    console.log(
      `loadtests e2e (retryable-writes): ${load.sent.length} sends (${retries.length} retries) by ${options.vus} VUs in ${load.ms} ms; ` +
        `${total(load.outcomes, 'retriesFromHistory')} retries answered from history; check ${JSON.stringify(check)}`,
    );

    expect(failures(load.outcomes)).toEqual([]);
    expect(total(load.outcomes, 'inserted')).toBe(options.vus * ITERATIONS);
    // A retry rate of 0.5 over 200 writes: a retry of each kind, through each router.
    expect(total(load.outcomes, 'retriesSent')).toBe(retries.length);
    expect(total(load.outcomes, 'retriesFromHistory')).toBe(retries.length);
    for (const name of ['insert retry', 'update retry'])
      for (const router of cluster.routerUrls) expect(retries.some((s) => s.name === name && s.routerUrl === router)).toBe(true);
    // Each retry went through another router than its first send (the same body, lsid and txnNumber included).
    for (const retry of retries) {
      const first = load.sent.find((s) => s !== retry && JSON.stringify(s.body) === JSON.stringify(retry.body));
      expect(first).toBeDefined();
      expect(first!.routerUrl).not.toBe(retry.routerUrl);
    }
    expect(check).toEqual({ documents: options.vus * ITERATIONS, doubled: 0, unapplied: 0 });
  }, 90_000);

  it('a client that loses its session before it retries doubles its $incs, and teardown’s check reports each one', async () => {
    // Its own collection: dropping and re-creating the first one makes shard0 refuse the inserts
    // (InternalError: collections_ns_key), a cluster bug this file does not cover.
    const lost = { ...options, ns: 'load.retryable_writes_lost' };
    setup = await run(setupCollection(lost, collectionSpecOf('retryable-writes', 2), () => Date.now()));
    // The broken client: a retry goes out under a new session, so no router can know it ran.
    const loseSession: Rewrite = (step) =>
      step.name?.endsWith(' retry') === true
        ? { ...step, body: { ...(step.body as object), lsid: { id: { $uuid: randomUUID() } } } }
        : step;
    const load = await runVus(lost, 2000, ITERATIONS, loseSession);
    const incRetries = load.sent.filter((s) => s.name === 'update retry').length;
    const insertRetries = load.sent.filter((s) => s.name === 'insert retry').length;
    const check = await run(checkRetryableWrites(setup.ns));
    console.log(
      `loadtests e2e (retryable-writes, session lost): ${incRetries} $inc retries, ${insertRetries} insert retries; check ${JSON.stringify(check)}`,
    );

    expect(incRetries).toBeGreaterThan(0);
    // Every $inc sent again ran again: exactly those documents are doubled, and the check says so.
    expect(check).toEqual({ documents: options.vus * ITERATIONS, doubled: incRetries, unapplied: 0 });
    // And the load itself saw it: no retry answered from history, each counted as a failure
    // (an insert sent again is refused as a duplicate key, an $inc answered as a new execution).
    expect(total(load.outcomes, 'retriesFromHistory')).toBe(0);
    expect(
      failures(load.outcomes)
        .map((f) => f.op)
        .sort(),
    ).toEqual([...Array<string>(insertRetries).fill('insert retry'), ...Array<string>(incRetries).fill('update retry')]);
  }, 90_000);
});
