import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  HELLO_PATH,
  type PoolEvent,
  type RollOutcome,
  type RollVu,
  type StepAnswer,
  type WorkloadOptions,
  collectionSpecOf,
  newRollVu,
  parseWorkloadOptions,
  rollIteration,
  seededRandom,
  setupCollection,
} from '../../loadtests/lib/index.ts';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';
import { type RouterStep, runSequence, sendToRouter } from './k6-sequence-driver.js';
import { FAST_CONFIG_ENV, eventually, waitForLeader } from './helpers.js';
import { rootApi, startTestCluster } from './test-cluster.js';

// The router-roll workload's logic (loadtests/lib/router-roll.ts, router-pool.ts) driven from Node
// against three real routers that quiesce on SIGTERM (TESSERA_QUIESCE_MS): four VUs insert, each
// through its own pool of the routers, while every router in turn is stopped (SIGTERM), waited
// for, started again and waited for until its hello answers. No insert may fail, every
// acknowledged document must be stored exactly once, and the pools must have taken every router
// out on its ShutdownInProgress hello and back once the restarted process answered. Then the same
// load from clients that ignore hello, over one router's roll each: one that retries writes loses
// nothing either (each insert that meets the stopped router goes once more to the next, and the
// session's history keeps it from running twice), and one that does not must count failed
// inserts, or the zero above would prove nothing.

const ROUTERS = 3;
/** Iterations every phase of a roll waits for, so each router takes load before it goes and after it is back. */
const PROGRESS = 40;

let cluster: LocalCluster;
let dispose: () => Promise<void>;
let options: WorkloadOptions;

beforeAll(async () => {
  ({ cluster, dispose } = await startTestCluster({
    shards: 2,
    routers: ROUTERS,
    env: { ...FAST_CONFIG_ENV, TESSERA_QUIESCE_MS: '2000' },
  }));
  await waitForLeader(cluster.configClient());
  options = optionsWith({});
}, 120_000);

/** The workload's options for this cluster: 4 VUs, small documents, hello every 150 ms, and `env`. */
function optionsWith(env: Record<string, string>): WorkloadOptions {
  return parseWorkloadOptions('router-roll', {
    ROUTER_URL: cluster.routerUrls[0],
    ROUTER_URLS: cluster.routerUrls.join(','),
    CONFIG_URL: cluster.configUrl,
    ADMIN_TOKEN: cluster.controlPlaneTokens.admin,
    API_KEY: cluster.rootKey,
    VUS: '4',
    DOC_BYTES: '256',
    HELLO_INTERVAL: '150ms',
    ...env,
  });
}

afterAll(async () => {
  await dispose?.();
});

type Client = (step: RouterStep, settings: WorkloadOptions) => Promise<StepAnswer>;
const asBuilt: Client = (step, settings) => sendToRouter(settings, step);
/** Every hello "answers" usable: the pool never hears of a quiesce. */
const ignoresHello: Client = (step, settings) =>
  step.path === HELLO_PATH
    ? Promise.resolve({ status: 200, body: { isWritablePrimary: true, msg: 'isdbgrid', ok: 1 } })
    : sendToRouter(settings, step);

/** The k6 scenario: `settings.vus` VUs side by side, each with its own pool and session, iterating until `stop`. */
function startLoad(settings: WorkloadOptions, seed: number, client: Client = asBuilt) {
  const outcomes: RollOutcome[] = [];
  const vus: RollVu[] = [];
  let stopping = false;
  const started = Date.now();
  const running = Promise.all(
    Array.from({ length: settings.vus }, async (_, i) => {
      const vu = newRollVu(settings, i + 1, seededRandom(seed + i));
      vus.push(vu);
      for (let iteration = 0; !stopping; iteration++)
        outcomes.push(
          await runSequence(
            settings,
            rollIteration(settings, vu, iteration, () => Date.now()),
            (step) => client(step, settings),
          ),
        );
    }),
  );
  return {
    outcomes,
    vus,
    /** Resolves once `n` more iterations have ended. */
    progress: (n: number) => {
      const target = outcomes.length + n;
      return eventually(async () => (outcomes.length >= target ? true : undefined), `${n} more iterations`, 30_000);
    },
    stop: async () => {
      stopping = true;
      await running;
      return Date.now() - started;
    },
  };
}

/** SIGTERM (the router quiesces, then exits), start it again, and wait until its hello answers. */
async function rollRouter(name: string, whileDown: () => Promise<unknown> = async () => undefined): Promise<void> {
  await cluster.stopNode(name);
  await whileDown();
  await cluster.restart(name);
  const hello = `${cluster.node(name).url}${HELLO_PATH}`;
  await eventually(async () => ((await fetch(hello)).status === 200 ? true : undefined), `${name} to answer hello`);
}

/** Every document of `ns` through a router: the _ids, in order. */
async function storedIds(ns: string): Promise<string[]> {
  const api = rootApi(cluster);
  try {
    const documents = (await api.findAll(ns, { filter: {}, projection: { _id: 1 } })) as Array<{ _id: string }>;
    return documents.map((d) => d._id).sort();
  } finally {
    await api.close();
  }
}

const outEvents = (outcomes: RollOutcome[]) =>
  outcomes.flatMap((o) => o.events).filter((e): e is Extract<PoolEvent, { kind: 'out' }> => e.kind === 'out');

function describeLoad(outcomes: RollOutcome[], ms: number): string {
  const outs: Record<string, number> = {};
  for (const event of outEvents(outcomes)) outs[`${event.via}:${event.reason}`] = (outs[`${event.via}:${event.reason}`] ?? 0) + 1;
  const retries = outcomes.reduce((sum, o) => sum + o.retries, 0);
  const hellos = outcomes.reduce((sum, o) => sum + o.hellos, 0);
  return (
    `${outcomes.length} inserts in ${ms} ms: ${outcomes.filter((o) => o.ok).length} acknowledged, ${outcomes.filter((o) => !o.ok).length} failed; ` +
    `${hellos} hellos; routers out ${JSON.stringify(outs)}; ${retries} inserts sent again`
  );
}

describe('the router-roll workload against three routers', () => {
  it('fails no insert while every router is rolled in turn, stores every acknowledged insert once, and moves on the quiesce signal', async () => {
    await runSequence(
      options,
      setupCollection(options, collectionSpecOf('router-roll', 2), () => Date.now()),
    );
    const load = startLoad(options, 1000);
    for (let i = 0; i < ROUTERS; i++) {
      await load.progress(PROGRESS);
      await rollRouter(`router${i}`);
    }
    // Every VU's pool has every router back before the load stops, so the restarted ones took inserts again.
    await eventually(
      async () => (load.vus.every((vu) => vu.pool.routers.every((r) => r.usable)) ? true : undefined),
      'every pool to have every router back',
    );
    await load.progress(PROGRESS);
    const ms = await load.stop();
    const { outcomes } = load;
    console.log(`loadtests e2e (router-roll): ${describeLoad(outcomes, ms)}`);

    expect(outcomes.filter((o) => !o.ok)).toEqual([]);
    const acknowledged = outcomes.map((o) => o.documentId).sort();
    expect(await storedIds(options.ns)).toEqual(acknowledged);
    // Every router was seen quiescing: its hello answered ShutdownInProgress with the raised
    // topologyVersion, and a hello from its restarted process (another processId) took it back.
    for (const url of cluster.routerUrls) {
      const quiesced = outEvents(outcomes).filter((e) => e.routerUrl === url && e.via === 'hello' && e.reason === 'ShutdownInProgress');
      expect(quiesced.length, url).toBeGreaterThan(0);
      expect(quiesced[0]!.topologyVersion).toMatchObject({ counter: 1 });
      const back = outcomes.flatMap((o) => o.events).filter((e) => e.kind === 'in' && e.routerUrl === url);
      expect(back.length, url).toBeGreaterThan(0);
      expect(back[0]!.topologyVersion?.processId).not.toBe(quiesced[0]!.topologyVersion?.processId);
    }
    for (const url of cluster.routerUrls)
      expect(outcomes.some((o) => o.sends.some((s) => s.routerUrl === url && s.status === 200))).toBe(true);
  }, 180_000);

  it('a client that ignores hello but retries writes loses no insert either: each one that meets the stopped router goes once more to the next', async () => {
    // Each case its own collection: dropping and re-creating one makes shard0 refuse inserts (the
    // cluster bug loadtests-transactions.e2e.spec.ts notes).
    const retrying = optionsWith({ NS: 'load.router_roll_retries' });
    await runSequence(
      retrying,
      setupCollection(retrying, collectionSpecOf('router-roll', 2), () => Date.now()),
    );
    const load = startLoad(retrying, 3000, ignoresHello);
    await load.progress(PROGRESS);
    // The router stays down until the client has met it: no race with the restart's speed.
    await rollRouter('router2', () =>
      eventually(
        async () => (load.outcomes.some((o) => o.retries > 0) ? true : undefined),
        'an insert sent again while router2 is down',
        15_000,
      ),
    );
    await load.progress(PROGRESS);
    const ms = await load.stop();
    const { outcomes } = load;
    console.log(`loadtests e2e (router-roll, hello ignored, retries): ${describeLoad(outcomes, ms)}`);

    expect(outcomes.filter((o) => !o.ok)).toEqual([]);
    const retried = outcomes.filter((o) => o.retries > 0);
    expect(retried.length).toBeGreaterThan(0);
    for (const outcome of retried) {
      expect(outcome.sends).toHaveLength(2);
      expect(outcome.sends[0]).toMatchObject({ routerUrl: cluster.routerUrls[2], failure: expect.any(String) });
      expect(outcome.sends[1]).toMatchObject({ status: 200, failure: null });
    }
    expect(await storedIds(retrying.ns)).toEqual(outcomes.map((o) => o.documentId).sort());
  }, 120_000);

  it('a client that ignores hello and does not retry writes fails inserts over one router’s roll, and the count shows it', async () => {
    const broken = optionsWith({ NS: 'load.router_roll_broken', RETRY_WRITES: 'false' });
    await runSequence(
      broken,
      setupCollection(broken, collectionSpecOf('router-roll', 2), () => Date.now()),
    );
    const load = startLoad(broken, 2000, ignoresHello);
    await load.progress(PROGRESS);
    // The router stays down until the client has met it: no race with the restart's speed.
    await rollRouter('router1', () =>
      eventually(async () => (load.outcomes.some((o) => !o.ok) ? true : undefined), 'a failed insert while router1 is down', 15_000),
    );
    await load.progress(PROGRESS);
    const ms = await load.stop();
    const { outcomes } = load;
    console.log(`loadtests e2e (router-roll, hello ignored, no retries): ${describeLoad(outcomes, ms)}`);

    const failed = outcomes.filter((o) => !o.ok);
    expect(failed.length).toBeGreaterThan(0);
    // Each failure is the rolled router gone or closing, met once: nothing was sent again.
    for (const outcome of failed) {
      expect(outcome.sends).toEqual([{ routerUrl: cluster.routerUrls[1], status: expect.any(Number), failure: expect.any(String) }]);
      expect(outcome.problem).toMatch(/^(no answer|HTTP 503)$/);
    }
    expect(outEvents(outcomes).some((e) => e.reason === 'ShutdownInProgress')).toBe(false);
    // What was acknowledged is still stored exactly once; only the failed inserts are in doubt.
    const stored = await storedIds(broken.ns);
    expect(new Set(stored).size).toBe(stored.length);
    const acknowledged = outcomes.filter((o) => o.ok).map((o) => o.documentId);
    const storedSet = new Set(stored);
    expect(acknowledged.filter((id) => !storedSet.has(id))).toEqual([]);
  }, 120_000);
});
