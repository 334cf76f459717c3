import { describe, expect, it } from 'vitest';
import {
  CLOSING,
  HELLO_PATH,
  MAX_OUT_BACKOFF_MS,
  type PoolOperation,
  type RouterPool,
  SERVER_SELECTION_TIMEOUT_MS,
  SHUTDOWN_IN_PROGRESS,
  UNREACHABLE,
  checkRouters,
  isStale,
  judgeHello,
  newRouterPool,
  nextHelloAtMs,
  outBackoffMs,
  recordHello,
  routerFailureOf,
  routersDueForHello,
  runOnPool,
  selectRouter,
  takeOut,
} from './router-pool.ts';
import type { Sequence, Step, StepAnswer } from './steps.ts';

const ROUTERS = ['http://r0:7070', 'http://r1:7070', 'http://r2:7070'];
const INTERVAL = 200;

type RouterStep = Extract<Step, { kind: 'router' }>;

/** How a fake router answers: serving, quiescing (serves, hello refuses), closing (refuses all with a bare 503), or gone. */
type RouterState = 'up' | 'quiescing' | 'closing' | 'down';

const helloUp = (processId = 'p0', counter = 0): StepAnswer => ({
  status: 200,
  body: { isWritablePrimary: true, msg: 'isdbgrid', topologyVersion: { processId, counter }, ok: 1 },
});
const helloQuiescing = (processId = 'p0', counter = 1): StepAnswer => ({
  status: 503,
  body: {
    ok: 0,
    code: 91,
    codeName: 'ShutdownInProgress',
    errmsg: 'the router is quiescing',
    details: { isWritablePrimary: false, topologyVersion: { processId, counter }, remainingQuiesceMs: 1500 },
  },
});
const NO_ANSWER: StepAnswer = { status: 0, body: null };
const FASTIFY_CLOSING: StepAnswer = {
  status: 503,
  body: { error: 'Service Unavailable', message: 'Service Unavailable', statusCode: 503 },
};
const INSERTED: StepAnswer = { status: 200, body: { insertedCount: 1, writeErrors: [], ok: 1 } };
const DUPLICATE_KEY: StepAnswer = {
  status: 200,
  body: { insertedCount: 0, writeErrors: [{ index: 0, code: 11000, codeName: 'DuplicateKey', errmsg: 'dup' }], ok: 1 },
};

/**
 * Fake routers on a fake clock: every request takes 1 ms and a sleep moves the clock on. Each
 * router answers as its state says; `insert` overrides the answer of a serving router's insert.
 */
function fakeRouters(states: Record<string, RouterState>, insert: (url: string) => StepAnswer = () => INSERTED) {
  let clock = 0;
  const log: Array<{ url: string; path: string; name: string | undefined; body: unknown }> = [];
  const sleeps: number[] = [];
  const answer = (step: RouterStep): StepAnswer => {
    const url = step.routerUrl as string;
    log.push({ url, path: step.path, name: step.name, body: step.body });
    fake.beforeAnswer(log.length);
    const state = states[url] ?? 'up';
    if (state === 'down') return NO_ANSWER;
    if (state === 'closing') return FASTIFY_CLOSING;
    if (step.path === HELLO_PATH) return state === 'quiescing' ? helloQuiescing() : helloUp();
    return insert(url);
  };
  function drive<T>(sequence: Sequence<T>): T {
    let next = sequence.next();
    while (!next.done) {
      const step = next.value;
      if (step.kind === 'graphql') throw new Error('unexpected graphql step');
      if (step.kind === 'sleep') {
        sleeps.push(step.ms);
        clock += step.ms;
        next = sequence.next(NO_ANSWER);
        continue;
      }
      clock += 1;
      next = sequence.next(answer(step));
    }
    return next.value;
  }
  const fake = {
    states,
    log,
    sleeps,
    drive,
    now: () => clock,
    /** Called with the number of requests so far, before each is answered: a test changes a router's state there. */
    beforeAnswer: (_requests: number): void => undefined,
  };
  return fake;
}

const OPERATION: PoolOperation = {
  path: '/v1/load/router_roll/insert',
  body: { documents: [{ _id: 'vu1-0' }], txnNumber: 1 },
  name: 'insert',
};

function checkedPool(fake: ReturnType<typeof fakeRouters>): RouterPool {
  const pool = newRouterPool(ROUTERS, INTERVAL);
  fake.drive(checkRouters(pool, fake.now, { events: [], hellos: 0 }));
  return pool;
}

describe('judging hello', () => {
  it.each([
    ['a writable router is usable', helloUp('p7', 3), { usable: true, topologyVersion: { processId: 'p7', counter: 3 } }],
    [
      'quiesce mode is out, with its raised topologyVersion',
      helloQuiescing('p7', 4),
      { usable: false, reason: 'ShutdownInProgress', topologyVersion: { processId: 'p7', counter: 4 } },
    ],
    ['no answer is out as unreachable', NO_ANSWER, { usable: false, reason: 'unreachable', topologyVersion: null }],
    ['a closing server is out by its status', FASTIFY_CLOSING, { usable: false, reason: 'HTTP 503', topologyVersion: null }],
    [
      'a 200 that does not take writes is out',
      { status: 200, body: { isWritablePrimary: false, ok: 1 } },
      { usable: false, reason: 'notWritablePrimary', topologyVersion: null },
    ],
  ])('%s', (_, answer, outcome) => {
    expect(judgeHello(answer.status, answer.body)).toEqual(outcome);
  });
});

describe('which failures of an operation send it to another router', () => {
  it.each([
    ['no answer (connection refused or reset)', NO_ANSWER, UNREACHABLE],
    ['a ShutdownInProgress refusal', helloQuiescing(), SHUTDOWN_IN_PROGRESS],
    ['a bare 503 from a closing HTTP server', FASTIFY_CLOSING, CLOSING],
    ['a success', INSERTED, null],
    ['a DuplicateKey write error: any router would give it', DUPLICATE_KEY, null],
    ['a refusal of the request itself', { status: 400, body: { ok: 0, code: 2, codeName: 'BadValue' } }, null],
    [
      'a shard the router cannot reach: another router could not either',
      { status: 503, body: { ok: 0, codeName: 'HostUnreachable' } },
      null,
    ],
  ])('%s: %s', (_, answer, failure) => {
    expect(routerFailureOf(answer.status, answer.body)).toBe(failure);
  });
});

describe('the pool', () => {
  it('has no usable router until hello answers, and asks every router at once', () => {
    const pool = newRouterPool(ROUTERS, INTERVAL);
    expect(selectRouter(pool)).toBeNull();
    expect(routersDueForHello(pool, 0)).toEqual(ROUTERS);
    const fake = fakeRouters({ [ROUTERS[1]!]: 'down' });
    const activity = { events: [], hellos: 0 };
    fake.drive(checkRouters(pool, fake.now, activity));
    expect(activity.hellos).toBe(3);
    expect(pool.routers.map((r) => r.usable)).toEqual([true, false, true]);
    expect(activity.events).toEqual([{ kind: 'out', routerUrl: ROUTERS[1], reason: 'unreachable', via: 'hello', topologyVersion: null }]);
  });

  it('takes the usable routers in turn and skips the ones out', () => {
    const pool = checkedPool(fakeRouters({}));
    expect([1, 2, 3, 4].map(() => selectRouter(pool))).toEqual([ROUTERS[0], ROUTERS[1], ROUTERS[2], ROUTERS[0]]);
    recordHello(pool, ROUTERS[2]!, judgeHello(helloQuiescing().status, helloQuiescing().body), 10);
    expect([1, 2, 3, 4].map(() => selectRouter(pool))).toEqual([ROUTERS[1], ROUTERS[0], ROUTERS[1], ROUTERS[0]]);
  });

  it('takes a quiescing router out once, remembering its topologyVersion, and takes it back when the restarted process answers', () => {
    const pool = checkedPool(fakeRouters({}));
    const quiescing = judgeHello(helloQuiescing('p0', 1).status, helloQuiescing('p0', 1).body);
    expect(recordHello(pool, ROUTERS[0]!, quiescing, 100)).toEqual({
      kind: 'out',
      routerUrl: ROUTERS[0],
      reason: 'ShutdownInProgress',
      via: 'hello',
      topologyVersion: { processId: 'p0', counter: 1 },
    });
    expect(recordHello(pool, ROUTERS[0]!, quiescing, 300)).toBeNull();
    expect(pool.routers[0]).toMatchObject({
      usable: false,
      outReason: 'ShutdownInProgress',
      topologyVersion: { processId: 'p0', counter: 1 },
    });
    const restarted = judgeHello(helloUp('p1', 0).status, helloUp('p1', 0).body);
    expect(recordHello(pool, ROUTERS[0]!, restarted, 2500)).toEqual({
      kind: 'in',
      routerUrl: ROUTERS[0],
      topologyVersion: { processId: 'p1', counter: 0 },
    });
    expect(pool.routers[0]).toMatchObject({ usable: true, outReason: null, failedChecks: 0 });
  });

  it('ignores a hello answer older than the topologyVersion it has from the same process', () => {
    const pool = checkedPool(fakeRouters({}));
    recordHello(pool, ROUTERS[0]!, judgeHello(helloQuiescing('p0', 1).status, helloQuiescing('p0', 1).body), 100);
    expect(recordHello(pool, ROUTERS[0]!, { usable: true, topologyVersion: { processId: 'p0', counter: 0 } }, 110)).toBeNull();
    expect(pool.routers[0]!.usable).toBe(false);
    expect(isStale({ processId: 'p0', counter: 1 }, { processId: 'p1', counter: 0 })).toBe(false);
    expect(isStale({ processId: 'p0', counter: 1 }, null)).toBe(false);
  });

  it('asks a usable router every interval and an out one after a back-off that doubles up to its cap', () => {
    expect([1, 2, 3, 4, 5, 6].map((failed) => outBackoffMs(failed, INTERVAL))).toEqual([200, 400, 800, 1000, 1000, 1000]);
    expect(outBackoffMs(1, 5000)).toBe(5000);
    const pool = checkedPool(fakeRouters({}));
    expect(nextHelloAtMs(pool, pool.routers[0]!)).toBe(1 + INTERVAL);
    for (let check = 1; check <= 3; check++)
      recordHello(pool, ROUTERS[0]!, { usable: false, reason: UNREACHABLE, topologyVersion: null }, 1000);
    expect(nextHelloAtMs(pool, pool.routers[0]!)).toBe(1000 + 4 * INTERVAL);
    expect(MAX_OUT_BACKOFF_MS).toBeLessThan(2000);
  });

  it('takes a router out on an operation’s failure once, and keeps it out until a hello answers', () => {
    const pool = checkedPool(fakeRouters({}));
    expect(takeOut(pool, ROUTERS[1]!, UNREACHABLE, 50, null)).toEqual({
      kind: 'out',
      routerUrl: ROUTERS[1],
      reason: 'unreachable',
      via: 'operation',
      topologyVersion: null,
    });
    expect(takeOut(pool, ROUTERS[1]!, UNREACHABLE, 60, null)).toBeNull();
    expect(routersDueForHello(pool, 50 + INTERVAL - 1)).not.toContain(ROUTERS[1]);
    expect(routersDueForHello(pool, 50 + INTERVAL)).toContain(ROUTERS[1]);
  });
});

describe('an operation on the pool', () => {
  it('goes to the next router that answered hello, and never to one that answered ShutdownInProgress', () => {
    const fake = fakeRouters({ [ROUTERS[0]!]: 'quiescing' });
    const pool = newRouterPool(ROUTERS, INTERVAL);
    const results = [1, 2, 3, 4].map(() => fake.drive(runOnPool(pool, OPERATION, 1, fake.now)));
    expect(results.every((r) => r.answer?.status === 200 && r.sends.length === 1)).toBe(true);
    expect(fake.log.filter((s) => s.path !== HELLO_PATH).map((s) => s.url)).toEqual([ROUTERS[1], ROUTERS[2], ROUTERS[1], ROUTERS[2]]);
    expect(results[0]!.events).toEqual([
      { kind: 'out', routerUrl: ROUTERS[0], reason: 'ShutdownInProgress', via: 'hello', topologyVersion: { processId: 'p0', counter: 1 } },
    ]);
  });

  it('is sent once more, unchanged, through the next router when its router is gone, and that router is taken out', () => {
    const fake = fakeRouters({});
    const pool = checkedPool(fake);
    fake.states[ROUTERS[0]!] = 'down';
    const result = fake.drive(runOnPool(pool, OPERATION, 1, fake.now));
    expect(result.answer).toEqual(INSERTED);
    expect(result.sends).toEqual([
      { routerUrl: ROUTERS[0], status: 0, failure: 'unreachable' },
      { routerUrl: ROUTERS[1], status: 200, failure: null },
    ]);
    const sent = fake.log.filter((s) => s.path === OPERATION.path);
    expect(sent.map((s) => s.name)).toEqual(['insert', 'insert retry']);
    expect(sent[1]!.body).toEqual(sent[0]!.body);
    expect(result.events).toEqual([{ kind: 'out', routerUrl: ROUTERS[0], reason: 'unreachable', via: 'operation', topologyVersion: null }]);
    expect(pool.routers[0]!.usable).toBe(false);
  });

  it('is sent again after a closing server’s 503 or a ShutdownInProgress refusal', () => {
    for (const refusal of [FASTIFY_CLOSING, helloQuiescing()]) {
      const fake = fakeRouters({}, (url) => (url === ROUTERS[0] ? refusal : INSERTED));
      const pool = checkedPool(fake);
      const result = fake.drive(runOnPool(pool, OPERATION, 1, fake.now));
      expect(result.answer).toEqual(INSERTED);
      expect(result.sends.map((s) => s.routerUrl)).toEqual([ROUTERS[0], ROUTERS[1]]);
    }
  });

  it('ends with a DuplicateKey write error as its answer: not sent again, and its router stays in', () => {
    const fake = fakeRouters({}, () => DUPLICATE_KEY);
    const pool = checkedPool(fake);
    const result = fake.drive(runOnPool(pool, OPERATION, 1, fake.now));
    expect(result.answer).toEqual(DUPLICATE_KEY);
    expect(result.sends).toHaveLength(1);
    expect(pool.routers.every((r) => r.usable)).toBe(true);
  });

  it('without retries ends with the router failure as its answer', () => {
    const fake = fakeRouters({});
    const pool = checkedPool(fake);
    fake.states[ROUTERS[0]!] = 'down';
    const result = fake.drive(runOnPool(pool, OPERATION, 0, fake.now));
    expect(result.answer).toEqual(NO_ANSWER);
    expect(result.sends).toEqual([{ routerUrl: ROUTERS[0], status: 0, failure: 'unreachable' }]);
    expect(pool.routers[0]!.usable).toBe(false);
  });

  it('waits while no router is usable, asking hello again, and goes to the first that comes back', () => {
    const fake = fakeRouters({ [ROUTERS[0]!]: 'down', [ROUTERS[1]!]: 'quiescing', [ROUTERS[2]!]: 'down' });
    const pool = newRouterPool(ROUTERS, INTERVAL);
    // The first router comes back once the pool has asked a few rounds of hello.
    fake.beforeAnswer = (requests) => {
      if (requests === 9) fake.states[ROUTERS[0]!] = 'up';
    };
    const result = fake.drive(runOnPool(pool, OPERATION, 1, fake.now));
    expect(fake.log.slice(0, 9).every((s) => s.path === HELLO_PATH)).toBe(true);
    expect(result.answer).toEqual(INSERTED);
    expect(result.sends).toEqual([{ routerUrl: ROUTERS[0], status: 200, failure: null }]);
    expect(fake.sleeps.length).toBeGreaterThan(0);
    expect(fake.sleeps.every((ms) => ms >= 1 && ms <= MAX_OUT_BACKOFF_MS)).toBe(true);
    expect(result.events.at(-1)).toEqual({ kind: 'in', routerUrl: ROUTERS[0], topologyVersion: { processId: 'p0', counter: 0 } });
  });

  it('fails without a send when no router is usable within the server selection timeout', () => {
    const fake = fakeRouters({ [ROUTERS[0]!]: 'down', [ROUTERS[1]!]: 'down', [ROUTERS[2]!]: 'down' });
    const pool = newRouterPool(ROUTERS, INTERVAL);
    const result = fake.drive(runOnPool(pool, OPERATION, 1, fake.now));
    expect(result.answer).toBeNull();
    expect(result.sends).toEqual([]);
    expect(fake.now()).toBeGreaterThanOrEqual(SERVER_SELECTION_TIMEOUT_MS);
    expect(fake.now()).toBeLessThan(SERVER_SELECTION_TIMEOUT_MS + 2 * MAX_OUT_BACKOFF_MS);
  });
});
