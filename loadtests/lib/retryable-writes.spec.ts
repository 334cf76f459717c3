import { describe, expect, it } from 'vitest';
import { seededRandom } from './keys.ts';
import { parseWorkloadOptions } from './options.ts';
import {
  type IterationOutcome,
  checkRetryableWrites,
  judgeFirstAnswer,
  judgeRetryAnswer,
  newVuSession,
  randomUuid,
  retryableWritesIteration,
  routersOf,
  txnNumberOf,
} from './retryable-writes.ts';
import type { Sequence, Step, StepAnswer } from './steps.ts';

const ROUTERS = ['http://r0:7070', 'http://r1:7070'];
const options = (env: Record<string, string> = {}) =>
  parseWorkloadOptions('retryable-writes', {
    ADMIN_TOKEN: 'admin-token-0123456789',
    ROUTER_URLS: ROUTERS.join(','),
    DOC_BYTES: '200',
    ...env,
  });

/** Runs a sequence against `answer`, recording the router steps. */
function drive<T>(sequence: Sequence<T>, answer: (step: Extract<Step, { kind: 'router' }>) => StepAnswer) {
  const steps: Array<Extract<Step, { kind: 'router' }>> = [];
  let next = sequence.next();
  while (!next.done) {
    const step = next.value;
    if (step.kind !== 'router') throw new Error(`unexpected ${step.kind} step`);
    steps.push(step);
    next = sequence.next(answer(step));
  }
  return { result: next.value, steps };
}

/** A router that runs each (lsid, txnNumber) once and answers repeats from history, as the cluster does. */
function honestRouter(): (step: Extract<Step, { kind: 'router' }>) => StepAnswer {
  const history = new Map<string, Record<string, unknown>>();
  return (step) => {
    const body = step.body as { lsid: { id: { $uuid: string } }; txnNumber: number };
    const key = `${body.lsid.id.$uuid}/${body.txnNumber}`;
    const first = history.get(key);
    if (first !== undefined) return { status: 200, body: { ...first, retriedStmtIds: [0] } };
    const answer = step.path.endsWith('/insert')
      ? { insertedCount: 1, writeErrors: [] }
      : { matchedCount: 1, modifiedCount: 1, upsertedCount: 0, writeErrors: [] };
    history.set(key, answer);
    return { status: 200, body: answer };
  };
}

/** A random source that answers `values` in turn (the UUID is made before, from a seed). */
const rolls = (...values: number[]) => {
  let i = 0;
  return () => values[i++ % values.length] as number;
};

describe('retryable-writes options', () => {
  it('uses ROUTER_URL alone and retries a fifth of the writes by default', () => {
    const defaults = parseWorkloadOptions('retryable-writes', { ADMIN_TOKEN: 'admin-token-0123456789', ROUTER_URL: 'http://a:1/' });
    expect(defaults.routerUrls).toEqual(['http://a:1']);
    expect(defaults.retryRate).toBe(0.2);
    expect(options({ RETRY_RATE: '1' })).toMatchObject({ routerUrls: ROUTERS, retryRate: 1 });
  });

  it.each([
    [{ RETRY_RATE: '1.5' }, 'RETRY_RATE must be a share from 0 to 1'],
    [{ RETRY_RATE: '-0.1' }, 'RETRY_RATE must be a share from 0 to 1'],
    [{ ROUTER_URLS: 'http://a:1,router:7070' }, 'ROUTER_URLS must be a comma-separated list'],
  ])('refuses %j', (env, message) => {
    expect(() => options(env)).toThrow(message);
  });
});

describe('a retryable-writes session', () => {
  it('makes up a version 4 UUID from its random source', () => {
    const uuid = randomUuid(seededRandom(7));
    expect(uuid).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(randomUuid(seededRandom(7))).toBe(uuid);
    expect(randomUuid(seededRandom(8))).not.toBe(uuid);
  });

  it('numbers its writes 1, 2, 3, ... over its iterations, never twice the same', () => {
    const numbers = [0, 1, 2].flatMap((iteration) => [txnNumberOf(iteration, 0), txnNumberOf(iteration, 1)]);
    expect(numbers).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it('retries through another router than the first when there are several, through the same when there is one', () => {
    expect(routersOf(ROUTERS, 1, 0, 0)).toEqual({ first: ROUTERS[1], retry: ROUTERS[0] });
    expect(routersOf(ROUTERS, 1, 0, 1)).toEqual({ first: ROUTERS[0], retry: ROUTERS[1] });
    expect(routersOf(['http://only:1'], 1, 0, 1)).toEqual({ first: 'http://only:1', retry: 'http://only:1' });
  });

  it('sends each kind of write first through every router in turn over the iterations', () => {
    const routers = ['a', 'b', 'c'];
    const inserts = [0, 1, 2].map((iteration) => routersOf(routers, 4, iteration, 0).first);
    const updates = [0, 1, 2].map((iteration) => routersOf(routers, 4, iteration, 1).first);
    expect(inserts.sort()).toEqual(routers);
    expect(updates.sort()).toEqual(routers);
  });
});

describe('a retryable-writes iteration', () => {
  const session = newVuSession(3, seededRandom(1));

  it('inserts its own document with n 0, then $incs it, each with the session and its next txnNumber', () => {
    const { result, steps } = drive(retryableWritesIteration(options({ RETRY_RATE: '0' }), session, 5, rolls(0.5)), honestRouter());
    expect(steps.map((s) => [s.name, s.path, s.routerUrl])).toEqual([
      ['insert', '/v1/load/retryable_writes/insert', ROUTERS[0]],
      ['update', '/v1/load/retryable_writes/update', ROUTERS[1]],
    ]);
    const insert = steps[0]!.body as { documents: Array<Record<string, unknown>>; lsid: unknown; txnNumber: number };
    expect(insert.documents[0]).toMatchObject({ _id: 'vu3-5', vu: 3, n: 0 });
    expect(JSON.stringify(insert.documents[0]).length).toBe(200);
    expect(insert).toMatchObject({ lsid: session.lsid, txnNumber: 11 });
    expect(steps[1]!.body).toEqual({ updates: [{ q: { _id: 'vu3-5' }, u: { $inc: { n: 1 } } }], lsid: session.lsid, txnNumber: 12 });
    expect(result).toEqual<IterationOutcome>({
      sends: [
        { op: 'insert', ok: true },
        { op: 'update', ok: true },
      ],
      inserted: 1,
      retriesSent: 0,
      retriesFromHistory: 0,
    });
  });

  it('sends a write drawn for a retry again, same body, through the other router, and counts it answered from history', () => {
    // 0.1 < RETRY_RATE: the insert is retried; 0.9: the $inc is not.
    const { result, steps } = drive(retryableWritesIteration(options({ RETRY_RATE: '0.5' }), session, 0, rolls(0.1, 0.9)), honestRouter());
    expect(steps.map((s) => [s.name, s.routerUrl, (s.body as { txnNumber: number }).txnNumber])).toEqual([
      ['insert', ROUTERS[1], 1],
      ['insert retry', ROUTERS[0], 1],
      ['update', ROUTERS[0], 2],
    ]);
    expect(steps[1]!.body).toEqual(steps[0]!.body);
    expect(result.sends.map((s) => [s.op, s.ok])).toEqual([
      ['insert', true],
      ['insert retry', true],
      ['update', true],
    ]);
    expect(result).toMatchObject({ retriesSent: 1, retriesFromHistory: 1, inserted: 1 });
  });

  it('does not send the $inc of a document whose insert failed', () => {
    const { result, steps } = drive(retryableWritesIteration(options(), session, 0, rolls(0.1)), () => ({
      status: 503,
      body: { ok: 0, codeName: 'ShutdownInProgress' },
    }));
    expect(steps).toHaveLength(1);
    expect(result).toEqual({
      sends: [{ op: 'insert', ok: false, problem: 'HTTP 503 ShutdownInProgress' }],
      inserted: 0,
      retriesSent: 0,
      retriesFromHistory: 0,
    });
  });

  it('counts a retry that ran again (a new execution, not history) as a failure', () => {
    let calls = 0;
    const { result } = drive(retryableWritesIteration(options({ RETRY_RATE: '1' }), session, 0, rolls(0)), (step) => {
      calls++;
      return step.path.endsWith('/insert')
        ? {
            status: 200,
            body: calls === 1 ? { insertedCount: 1, writeErrors: [] } : { insertedCount: 0, writeErrors: [{ codeName: 'DuplicateKey' }] },
          }
        : { status: 200, body: { matchedCount: 1, modifiedCount: 1, writeErrors: [] } };
    });
    expect(result.sends.map((s) => [s.op, s.ok, s.problem])).toEqual([
      ['insert', true, undefined],
      ['insert retry', false, 'writeError DuplicateKey'],
      ['update', true, undefined],
      ['update retry', false, 'not answered from history (retriedStmtIds undefined)'],
    ]);
    expect(result).toMatchObject({ retriesSent: 2, retriesFromHistory: 0 });
  });
});

describe('judging the answers', () => {
  it.each([
    ['insert', 200, { insertedCount: 1, writeErrors: [] }, true, undefined],
    ['insert', 200, { insertedCount: 0, writeErrors: [] }, false, 'inserted 0 of 1'],
    ['update', 200, { matchedCount: 0, modifiedCount: 0, writeErrors: [] }, false, 'matched 0 of 1'],
    ['update', 200, { writeErrors: [{ code: 225, codeName: 'TransactionTooOld' }] }, false, 'writeError TransactionTooOld'],
    ['update', 400, { ok: 0, codeName: 'InvalidOptions' }, false, 'HTTP 400 InvalidOptions'],
  ] as const)('a first %s answered %d %j is ok: %s', (op, status, body, ok, problem) => {
    expect(judgeFirstAnswer(op, status, body)).toEqual({ op, ok, ...(problem === undefined ? {} : { problem }) });
  });

  const first = { matchedCount: 1, modifiedCount: 1, upsertedCount: 0, writeErrors: [] };
  it.each([
    ['the first answer with retriedStmtIds [0]', { ...first, retriedStmtIds: [0] }, true, true, undefined],
    ['other counts', { ...first, modifiedCount: 0, retriedStmtIds: [0] }, false, true, 'answered modifiedCount 0, first 1'],
    ['no retriedStmtIds', first, false, false, 'not answered from history (retriedStmtIds undefined)'],
    ['an empty retriedStmtIds', { ...first, retriedStmtIds: [] }, false, false, 'not answered from history (retriedStmtIds [])'],
  ])('a retry answered with %s is ok: %s', (_, body, ok, fromHistory, problem) => {
    expect(judgeRetryAnswer('update', first, 200, body)).toEqual({
      op: 'update retry',
      ok,
      fromHistory,
      ...(problem === undefined ? {} : { problem }),
    });
  });
});

describe("teardown's check", () => {
  it('counts the documents, those with n above 1 (doubled) and below 1 (not applied) through the router', () => {
    const counts: Record<string, number> = { '{}': 500, '{"n":{"$gt":1}}': 2, '{"n":{"$lt":1}}': 1 };
    const { result, steps } = drive(checkRetryableWrites('load.retryable_writes'), (step) => ({
      status: 200,
      body: { n: counts[JSON.stringify((step.body as { filter: unknown }).filter)] },
    }));
    expect(steps.every((s) => s.path === '/v1/load/retryable_writes/count' && s.name === undefined)).toBe(true);
    expect(result).toEqual({ documents: 500, doubled: 2, unapplied: 1 });
  });

  it('fails rather than report a count it did not get', () => {
    expect(() => drive(checkRetryableWrites('load.retryable_writes'), () => ({ status: 404, body: { ok: 0 } }))).toThrow(
      'count {} on load.retryable_writes answered 404',
    );
  });
});
