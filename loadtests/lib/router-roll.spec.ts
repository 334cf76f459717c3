import { describe, expect, it } from 'vitest';
import { seededRandom } from './keys.ts';
import { parseWorkloadOptions } from './options.ts';
import { HELLO_PATH } from './router-pool.ts';
import { countRolledDocuments, judgeInsertAnswer, newRollVu, rollIteration } from './router-roll.ts';
import type { Sequence, Step, StepAnswer } from './steps.ts';

const ROUTERS = ['http://r0:7070', 'http://r1:7070'];
const options = (env: Record<string, string> = {}) =>
  parseWorkloadOptions('router-roll', { ADMIN_TOKEN: 'admin-token-0123456789', ROUTER_URLS: ROUTERS.join(','), DOC_BYTES: '200', ...env });

type RouterStep = Extract<Step, { kind: 'router' }>;
const HELLO: StepAnswer = { status: 200, body: { isWritablePrimary: true, topologyVersion: { processId: 'p', counter: 0 }, ok: 1 } };
const INSERTED: StepAnswer = { status: 200, body: { insertedCount: 1, writeErrors: [], ok: 1 } };

/** Runs a sequence against `answer`, on a clock that moves 1 ms a request; answers the result and the router steps. */
function drive<T>(sequence: Sequence<T>, answer: (step: RouterStep) => StepAnswer) {
  const steps: RouterStep[] = [];
  let clock = 0;
  let next = sequence.next();
  while (!next.done) {
    const step = next.value;
    if (step.kind !== 'router') throw new Error(`unexpected ${step.kind} step`);
    steps.push(step);
    clock++;
    next = sequence.next(answer(step));
  }
  return { result: next.value, steps, now: () => clock };
}

describe('router-roll options', () => {
  it('asks hello every 200 ms, retries writes and allows no error by default', () => {
    expect(options()).toMatchObject({
      helloIntervalMs: 200,
      retryWrites: true,
      maxErrorRate: 0,
      ns: 'load.router_roll',
      routerUrls: ROUTERS,
    });
    expect(options({ HELLO_INTERVAL: '150ms', RETRY_WRITES: 'false' })).toMatchObject({ helloIntervalMs: 150, retryWrites: false });
    expect(() => options({ RETRY_WRITES: 'yes', HELLO_INTERVAL: 'often' })).toThrow(
      /HELLO_INTERVAL must[\s\S]*RETRY_WRITES must be "true" or "false"/,
    );
  });
});

describe('judging the insert', () => {
  it.each([
    ['acknowledged', INSERTED, { ok: true }],
    ['answered from the session history', { status: 200, body: { insertedCount: 1, retriedStmtIds: [0], ok: 1 } }, { ok: true }],
    ['no answer', { status: 0, body: null }, { ok: false, problem: 'no answer' }],
    ['refused', { status: 503, body: { ok: 0, codeName: 'ShutdownInProgress' } }, { ok: false, problem: 'HTTP 503 ShutdownInProgress' }],
    [
      'a write error',
      { status: 200, body: { insertedCount: 0, writeErrors: [{ codeName: 'DuplicateKey' }] } },
      { ok: false, problem: 'writeError DuplicateKey' },
    ],
    ['nothing inserted', { status: 200, body: { insertedCount: 0 } }, { ok: false, problem: 'inserted 0 of 1' }],
  ])('%s', (_, answer, verdict) => {
    expect(judgeInsertAnswer(answer.status, answer.body)).toEqual(verdict);
  });
});

describe('an iteration', () => {
  it('checks hello, then inserts its own document as a retryable write through the next router', () => {
    const settings = options();
    const vu = newRollVu(settings, 3, seededRandom(1));
    const first = drive(
      rollIteration(settings, vu, 0, () => 0),
      (step) => (step.path === HELLO_PATH ? HELLO : INSERTED),
    );
    expect(first.steps.map((s) => `${s.method} ${s.routerUrl}${s.path}`)).toEqual([
      `GET ${ROUTERS[0]}/v1/hello`,
      `GET ${ROUTERS[1]}/v1/hello`,
      `POST ${ROUTERS[0]}/v1/load/router_roll/insert`,
    ]);
    expect(first.steps[2]!.body).toMatchObject({ documents: [{ _id: 'vu3-0', vu: 3 }], lsid: vu.session.lsid, txnNumber: 1 });
    expect(first.result).toMatchObject({ documentId: 'vu3-0', ok: true, retries: 0, hellos: 2, events: [] });
    // Within the hello interval the next iteration only inserts, through the other router, under the next txnNumber.
    const second = drive(
      rollIteration(settings, vu, 1, () => 10),
      () => INSERTED,
    );
    expect(second.steps.map((s) => s.routerUrl)).toEqual([ROUTERS[1]]);
    expect(second.steps[0]!.body).toMatchObject({ documents: [{ _id: 'vu3-1' }], txnNumber: 2 });
  });

  it('sends the insert once more through the other router after no answer, with the same session and txnNumber', () => {
    const settings = options();
    const vu = newRollVu(settings, 1, seededRandom(2));
    const run = drive(
      rollIteration(settings, vu, 4, () => 0),
      (step) => (step.path === HELLO_PATH ? HELLO : step.routerUrl === ROUTERS[0] ? { status: 0, body: null } : INSERTED),
    );
    const inserts = run.steps.filter((s) => s.path.endsWith('/insert'));
    expect(inserts.map((s) => [s.routerUrl, s.name])).toEqual([
      [ROUTERS[0], 'insert'],
      [ROUTERS[1], 'insert retry'],
    ]);
    expect(inserts[1]!.body).toEqual(inserts[0]!.body);
    expect(run.result).toMatchObject({ ok: true, retries: 1, events: [{ kind: 'out', reason: 'unreachable', via: 'operation' }] });
  });

  it('without RETRY_WRITES sends no session and counts a router gone as a failed insert', () => {
    const settings = options({ RETRY_WRITES: 'false' });
    const vu = newRollVu(settings, 1, seededRandom(3));
    const run = drive(
      rollIteration(settings, vu, 0, () => 0),
      (step) => (step.path === HELLO_PATH ? HELLO : { status: 0, body: null }),
    );
    const inserts = run.steps.filter((s) => s.path.endsWith('/insert'));
    expect(inserts).toHaveLength(1);
    expect(inserts[0]!.body).not.toHaveProperty('lsid');
    expect(inserts[0]!.body).not.toHaveProperty('txnNumber');
    expect(run.result).toMatchObject({ ok: false, problem: 'no answer', retries: 0 });
  });
});

describe('teardown', () => {
  it('counts the stored documents through the router, and refuses a count it cannot read', () => {
    expect(drive(countRolledDocuments('load.router_roll'), () => ({ status: 200, body: { n: 42, ok: 1 } })).result).toBe(42);
    expect(() => drive(countRolledDocuments('load.router_roll'), () => ({ status: 503, body: { ok: 0 } }))).toThrow(/answered 503/);
  });
});
