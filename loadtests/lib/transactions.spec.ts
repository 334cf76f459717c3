import { describe, expect, it } from 'vitest';
import { seededRandom } from './keys.ts';
import { parseWorkloadOptions } from './options.ts';
import type { Sequence, Step, StepAnswer } from './steps.ts';
import {
  MAX_COMMIT_RETRIES,
  MAX_TRANSFER,
  type TransferOutcome,
  type TxnVerdict,
  accountBatches,
  checkBalances,
  openAccounts,
  judgeAbortAnswer,
  judgeCommitAnswer,
  judgeStatementAnswer,
  newTxnSession,
  pickTransfer,
  routerOfTransfer,
  transferIteration,
} from './transactions.ts';

const ROUTERS = ['http://r0:7070', 'http://r1:7070'];
const options = (env: Record<string, string> = {}) =>
  parseWorkloadOptions('transactions', { ADMIN_TOKEN: 'admin-token-0123456789', ROUTER_URLS: ROUTERS.join(','), ...env });

type RouterStep = Extract<Step, { kind: 'router' }>;
type TxnBody = { lsid: { id: { $uuid: string } }; txnNumber: number; autocommit: false; startTransaction?: true };

/** Runs a sequence against `answer`, recording the router steps and the pauses. */
function drive<T>(sequence: Sequence<T>, answer: (step: RouterStep) => StepAnswer) {
  const steps: RouterStep[] = [];
  const sleeps: number[] = [];
  let next = sequence.next();
  while (!next.done) {
    const step = next.value;
    if (step.kind === 'graphql') throw new Error('unexpected graphql step');
    if (step.kind === 'sleep') {
      sleeps.push(step.ms);
      next = sequence.next({ status: 0, body: null });
      continue;
    }
    steps.push(step);
    next = sequence.next(answer(step));
  }
  return { result: next.value, steps, sleeps };
}

/**
 * A router in front of one bank: statements of a transaction change a private copy of the
 * balances, the commit publishes it, so the tests can see what a transfer did. `refuse` may
 * answer a step instead.
 */
function bankRouter(balances: Map<number, number>, refuse: (step: RouterStep, n: number) => StepAnswer | undefined = () => undefined) {
  let pending = new Map<number, number>();
  let n = 0;
  return (step: RouterStep): StepAnswer => {
    const refusal = refuse(step, n++);
    if (refusal !== undefined) return refusal;
    const body = step.body as TxnBody & {
      filter?: { _id: number };
      updates?: Array<{ q: { _id: number }; u: { $inc: { balance: number } } }>;
    };
    if (body.startTransaction) pending = new Map(balances);
    if (step.path.endsWith('/find')) {
      const _id = body.filter!._id;
      return { status: 200, body: { cursor: { id: '0', firstBatch: [{ _id, balance: pending.get(_id), transfers: 0 }] } } };
    }
    if (step.path.endsWith('/update')) {
      const { q, u } = body.updates![0]!;
      pending.set(q._id, pending.get(q._id)! + u.$inc.balance);
      return { status: 200, body: { matchedCount: 1, modifiedCount: 1, upsertedCount: 0, writeErrors: [], ok: 1 } };
    }
    if (step.path === '/v1/admin/commitTransaction') {
      for (const [id, balance] of pending) balances.set(id, balance);
      return { status: 200, body: { ok: 1, recoveryToken: { recoveryShardId: 'shard0' } } };
    }
    return { status: 200, body: { ok: 1 } };
  };
}

const accounts = (...balances: number[]) => new Map(balances.map((balance, id) => [id, balance]));
/** A random source that answers `values` in turn (the UUID is made before, from a seed). */
const rolls = (...values: number[]) => {
  let i = 0;
  return () => values[i++ % values.length] as number;
};
/** A transfer of 3 from account 0 to account 1; then 0.5 for every pause. */
const threeFromZeroToOne = () => rolls(0, 0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5);
const clock = () => {
  let now = 1000;
  return () => (now += 7);
};
const refusal = (status: number, codeName: string, errorLabels?: string[]): StepAnswer => ({
  status,
  body: { ok: 0, code: 1, codeName, errmsg: 'refused', ...(errorLabels === undefined ? {} : { errorLabels }) },
});
const WRITE_CONFLICT = refusal(409, 'WriteConflict', ['TransientTransactionError']);
const txnOf = (step: RouterStep) => step.body as TxnBody;

describe('transactions options', () => {
  it('opens 100 accounts of 100 and retries a transaction 5 times by default', () => {
    expect(options()).toMatchObject({ accounts: 100, openingBalance: 100, maxTxnRetries: 5, ns: 'load.transactions' });
    expect(options({ ACCOUNTS: '20', OPENING_BALANCE: '7', MAX_TXN_RETRIES: '0' })).toMatchObject({
      accounts: 20,
      openingBalance: 7,
      maxTxnRetries: 0,
    });
  });

  it.each([
    [{ ACCOUNTS: '1' }, 'ACCOUNTS must be a whole number from 2'],
    [{ OPENING_BALANCE: '0' }, 'OPENING_BALANCE must be a whole number from 1'],
    [{ MAX_TXN_RETRIES: '-1' }, 'MAX_TXN_RETRIES must be a whole number from 0'],
  ])('refuses %j', (env, message) => {
    expect(() => options(env)).toThrow(message);
  });
});

describe('the bank', () => {
  it('opens every account with the opening balance, BATCH to an insert', () => {
    const batches = accountBatches(options({ ACCOUNTS: '25', OPENING_BALANCE: '40', BATCH: '10' }));
    expect(batches.map((b) => [b.path, (b.body as { documents: unknown[] }).documents.length])).toEqual([
      ['/v1/load/transactions/insert', 10],
      ['/v1/load/transactions/insert', 10],
      ['/v1/load/transactions/insert', 5],
    ]);
    const documents = batches.flatMap(
      (b) => (b.body as { documents: Array<{ _id: number; balance: number; transfers: number }> }).documents,
    );
    expect(documents.map((d) => d._id)).toEqual(Array.from({ length: 25 }, (_, i) => i));
    expect(documents.every((d) => d.balance === 40 && d.transfers === 0)).toBe(true);
  });

  it('opens the accounts, then counts them through every router, so that each router’s ClusterTime has passed them', () => {
    const { result, steps } = drive(openAccounts(options({ ACCOUNTS: '15' })), (step) =>
      step.path.endsWith('/insert')
        ? { status: 200, body: { insertedCount: (step.body as { documents: unknown[] }).documents.length, writeErrors: [] } }
        : { status: 200, body: { n: 15 } },
    );
    expect(steps.map((step) => [step.path, step.routerUrl])).toEqual([
      ['/v1/load/transactions/insert', undefined],
      ['/v1/load/transactions/insert', undefined],
      ['/v1/load/transactions/count', ROUTERS[0]],
      ['/v1/load/transactions/count', ROUTERS[1]],
    ]);
    expect(result).toBe(15);
  });

  it('stops setup when a router does not count every account', () => {
    expect(() =>
      drive(openAccounts(options({ ACCOUNTS: '15' })), (step) =>
        step.path.endsWith('/insert')
          ? { status: 200, body: { insertedCount: (step.body as { documents: unknown[] }).documents.length, writeErrors: [] } }
          : { status: 200, body: { n: step.routerUrl === ROUTERS[1] ? 12 : 15 } },
      ),
    ).toThrow('http://r1:7070 counts 12 of 15 accounts in load.transactions (HTTP 200)');
  });

  it('transfers between two distinct accounts, from 1 to MAX_TRANSFER, every account on either side', () => {
    const random = seededRandom(3);
    const transfers = Array.from({ length: 2000 }, () => pickTransfer(5, random));
    expect(transfers.every((t) => t.from !== t.to && t.amount >= 1 && t.amount <= MAX_TRANSFER)).toBe(true);
    expect(new Set(transfers.map((t) => t.from)).size).toBe(5);
    expect(new Set(transfers.map((t) => t.to)).size).toBe(5);
    expect(new Set(transfers.map((t) => t.amount)).size).toBe(MAX_TRANSFER);
  });

  it('sends a VU’s transfers through every router in turn', () => {
    expect([0, 1, 2, 3].map((iteration) => routerOfTransfer(ROUTERS, 1, iteration))).toEqual([
      ROUTERS[1],
      ROUTERS[0],
      ROUTERS[1],
      ROUTERS[0],
    ]);
    expect(routerOfTransfer(['http://only:1'], 3, 5)).toBe('http://only:1');
  });
});

describe('a transfer', () => {
  const session = () => newTxnSession(2, seededRandom(1));

  it('finds the payer, moves the money and commits, every command in one transaction through one router', () => {
    const balances = accounts(10, 10);
    const s = session();
    const { result, steps } = drive(transferIteration(options(), s, 0, threeFromZeroToOne(), clock()), bankRouter(balances));
    expect(steps.map((step) => [step.name, step.path, step.routerUrl])).toEqual([
      ['find', '/v1/load/transactions/find', ROUTERS[0]],
      ['debit', '/v1/load/transactions/update', ROUTERS[0]],
      ['credit', '/v1/load/transactions/update', ROUTERS[0]],
      ['commitTransaction', '/v1/admin/commitTransaction', ROUTERS[0]],
    ]);
    expect(steps[0]!.body).toEqual({ filter: { _id: 0 }, startTransaction: true, lsid: s.lsid, txnNumber: 1, autocommit: false });
    expect(steps[1]!.body).toEqual({
      updates: [{ q: { _id: 0 }, u: { $inc: { balance: -3, transfers: 1 } } }],
      lsid: s.lsid,
      txnNumber: 1,
      autocommit: false,
    });
    expect(steps.slice(1).every((step) => txnOf(step).startTransaction === undefined && txnOf(step).txnNumber === 1)).toBe(true);
    expect(balances).toEqual(accounts(7, 13));
    expect(s.txnNumber).toBe(1);
    expect(result).toEqual<TransferOutcome>({
      transfer: { from: 0, to: 1, amount: 3 },
      end: 'committed',
      aborts: [],
      txnRetries: 0,
      commitRetries: 0,
      commitMs: 7,
      sends: ['find', 'debit', 'credit', 'commitTransaction'].map((op) => ({ op, ok: true })) as TransferOutcome['sends'],
    });
  });

  it('aborts a transfer that would overdraw the payer, and moves nothing', () => {
    const balances = accounts(2, 10);
    const { result, steps } = drive(transferIteration(options(), session(), 0, threeFromZeroToOne(), clock()), bankRouter(balances));
    expect(steps.map((step) => step.name)).toEqual(['find', 'abortTransaction']);
    expect(txnOf(steps[1]!)).toMatchObject({ txnNumber: 1, autocommit: false });
    expect(balances).toEqual(accounts(2, 10));
    expect(result).toMatchObject({ end: 'overdrawn', aborts: ['overdraw'], txnRetries: 0, commitMs: null });
    expect(result.sends.every((send) => send.ok)).toBe(true);
  });

  it('runs the whole transaction again under a new txnNumber after a TransientTransactionError, after a pause', () => {
    const balances = accounts(10, 10);
    const s = session();
    const router = bankRouter(balances, (step, n) => (step.name === 'debit' && n === 1 ? WRITE_CONFLICT : undefined));
    const { result, steps, sleeps } = drive(transferIteration(options(), s, 0, threeFromZeroToOne(), clock()), router);
    expect(steps.map((step) => [step.name, txnOf(step).txnNumber, txnOf(step).startTransaction])).toEqual([
      ['find', 1, true],
      ['debit', 1, undefined],
      ['find', 2, true],
      ['debit', 2, undefined],
      ['credit', 2, undefined],
      ['commitTransaction', 2, undefined],
    ]);
    expect(sleeps).toEqual([10]);
    expect(balances).toEqual(accounts(7, 13));
    // A refusal the protocol expects is not an error.
    expect(result).toMatchObject({ end: 'committed', aborts: ['WriteConflict'], txnRetries: 1 });
    expect(result.sends.every((send) => send.ok)).toBe(true);
  });

  it('gives up after MAX_TXN_RETRIES runs again, each under a new txnNumber, each pause longer', () => {
    const s = session();
    const router = bankRouter(accounts(10, 10), (step) => (step.name === 'credit' ? WRITE_CONFLICT : undefined));
    const { result, steps, sleeps } = drive(
      transferIteration(options({ MAX_TXN_RETRIES: '2' }), s, 0, threeFromZeroToOne(), clock()),
      router,
    );
    expect(steps.filter((step) => step.name === 'find').map((step) => txnOf(step).txnNumber)).toEqual([1, 2, 3]);
    expect(steps.some((step) => step.name === 'commitTransaction')).toBe(false);
    expect(sleeps).toEqual([10, 20]);
    expect(s.txnNumber).toBe(3);
    expect(result).toMatchObject({ end: 'gaveUp', aborts: ['WriteConflict', 'WriteConflict', 'WriteConflict'], txnRetries: 2 });
  });

  it('after a statement that got no answer, aborts what may be left of the transaction, then runs it again', () => {
    const balances = accounts(10, 10);
    const router = bankRouter(balances, (step, n) => (step.name === 'credit' && n === 2 ? { status: 0, body: null } : undefined));
    const { result, steps } = drive(transferIteration(options(), session(), 0, threeFromZeroToOne(), clock()), router);
    expect(steps.map((step) => [step.name, txnOf(step).txnNumber])).toEqual([
      ['find', 1],
      ['debit', 1],
      ['credit', 1],
      ['abortTransaction', 1],
      ['find', 2],
      ['debit', 2],
      ['credit', 2],
      ['commitTransaction', 2],
    ]);
    expect(balances).toEqual(accounts(7, 13));
    expect(result).toMatchObject({ end: 'committed', aborts: ['unreachable'], txnRetries: 1 });
  });

  it('sends the commit again under the same txnNumber while its outcome is unknown, with the recovery token once it has one', () => {
    const token = { recoveryShardId: 'shard1' };
    const router = bankRouter(accounts(10, 10), (step, n) => {
      if (step.name !== 'commitTransaction' || n > 5) return undefined;
      if (n === 3) return { status: 0, body: null };
      return {
        status: 500,
        body: { ok: 0, codeName: 'HostUnreachable', errorLabels: ['UnknownTransactionCommitResult'], recoveryToken: token },
      };
    });
    const { result, steps, sleeps } = drive(transferIteration(options(), session(), 0, threeFromZeroToOne(), clock()), router);
    const commits = steps.filter((step) => step.name === 'commitTransaction');
    expect(commits.map((step) => [txnOf(step).txnNumber, (step.body as { recoveryToken?: unknown }).recoveryToken])).toEqual([
      [1, undefined],
      [1, undefined],
      [1, token],
      [1, token],
    ]);
    expect(commits.every((step) => step.routerUrl === ROUTERS[0])).toBe(true);
    expect(sleeps).toEqual([100, 200, 300]);
    expect(result).toMatchObject({ end: 'committed', commitRetries: 3, txnRetries: 0, aborts: [], commitMs: 7 });
    expect(result.sends.every((send) => send.ok)).toBe(true);
  });

  it('counts a commit whose outcome stays unknown as an error, and does not run the transfer again', () => {
    const router = bankRouter(accounts(10, 10), (step) => (step.name === 'commitTransaction' ? { status: 0, body: null } : undefined));
    const { result, steps } = drive(transferIteration(options(), session(), 0, threeFromZeroToOne(), clock()), router);
    expect(steps.filter((step) => step.name === 'commitTransaction')).toHaveLength(MAX_COMMIT_RETRIES + 1);
    expect(steps.filter((step) => step.name === 'find')).toHaveLength(1);
    expect(result).toMatchObject({ end: 'unknown', commitRetries: MAX_COMMIT_RETRIES, commitMs: null });
    expect(result.sends.filter((send) => !send.ok)).toEqual([
      { op: 'commitTransaction', ok: false, problem: `outcome unknown after ${MAX_COMMIT_RETRIES + 1} commits (unreachable)` },
    ]);
  });

  it('stops at an answer outside the protocol, counts it as an error and aborts the transaction', () => {
    const router = bankRouter(accounts(10, 10), (step) =>
      step.name === 'debit' ? { status: 200, body: { matchedCount: 0, modifiedCount: 0, writeErrors: [] } } : undefined,
    );
    const { result, steps } = drive(transferIteration(options(), session(), 0, threeFromZeroToOne(), clock()), router);
    expect(steps.map((step) => step.name)).toEqual(['find', 'debit', 'abortTransaction']);
    expect(result).toMatchObject({ end: 'failed', aborts: [], txnRetries: 0 });
    expect(result.sends.filter((send) => !send.ok)).toEqual([{ op: 'debit', ok: false, problem: 'matched 0, modified 0 of 1' }]);
  });
});

describe('judging the answers', () => {
  const found = (balance: unknown) => ({ cursor: { id: '0', firstBatch: [{ _id: 4, balance }] } });
  const moved = { matchedCount: 1, modifiedCount: 1, upsertedCount: 0, writeErrors: [] };
  it.each<[string, 'find' | 'debit' | 'credit', number, unknown, TxnVerdict]>([
    ['the payer', 'find', 200, found(40), { kind: 'ok', balance: 40 }],
    ['no account', 'find', 200, { cursor: { id: '0', firstBatch: [] } }, { kind: 'failed', reason: 'found 0 accounts of 1' }],
    ['an account without a balance', 'find', 200, found('40'), { kind: 'failed', reason: 'account without a balance' }],
    ['an $inc applied', 'debit', 200, moved, { kind: 'ok' }],
    [
      'an $inc that matched nothing',
      'credit',
      200,
      { ...moved, matchedCount: 0, modifiedCount: 0 },
      { kind: 'failed', reason: 'matched 0, modified 0 of 1' },
    ],
    ['a write conflict', 'debit', 409, WRITE_CONFLICT.body, { kind: 'transient', reason: 'WriteConflict' }],
    ['no answer', 'find', 0, null, { kind: 'transient', reason: 'unreachable' }],
    ['a refusal without a label', 'credit', 400, { ok: 0, codeName: 'BadValue' }, { kind: 'failed', reason: 'HTTP 400 BadValue' }],
    [
      'an unknown commit result, which only a commit can have',
      'debit',
      500,
      { ok: 0, codeName: 'HostUnreachable', errorLabels: ['UnknownTransactionCommitResult'] },
      { kind: 'failed', reason: 'HTTP 500 HostUnreachable' },
    ],
  ])('a statement answered with %s', (_, statement, status, body, verdict) => {
    expect(judgeStatementAnswer(statement, status, body)).toEqual(verdict);
  });

  it.each<[string, number, unknown, TxnVerdict]>([
    [
      'ok with a recovery token',
      200,
      { ok: 1, recoveryToken: { recoveryShardId: 'shard0' } },
      { kind: 'ok', recoveryToken: { recoveryShardId: 'shard0' } },
    ],
    ['ok without participants', 200, { ok: 1 }, { kind: 'ok' }],
    [
      'UnknownTransactionCommitResult',
      500,
      { ok: 0, codeName: 'HostUnreachable', errorLabels: ['UnknownTransactionCommitResult'] },
      { kind: 'unknownCommitResult', reason: 'HostUnreachable' },
    ],
    ['no answer', 0, null, { kind: 'unknownCommitResult', reason: 'unreachable' }],
    [
      'an abort decided by the coordinator',
      404,
      { ok: 0, codeName: 'NoSuchTransaction', errorLabels: ['TransientTransactionError'] },
      { kind: 'transient', reason: 'NoSuchTransaction' },
    ],
    ['a refusal without a label', 500, { ok: 0, codeName: 'InternalError' }, { kind: 'failed', reason: 'HTTP 500 InternalError' }],
  ])('a commit answered %s', (_, status, body, verdict) => {
    expect(judgeCommitAnswer(status, body)).toEqual(verdict);
  });

  it.each<[string, number, unknown, TxnVerdict['kind']]>([
    ['ok', 200, { ok: 1 }, 'ok'],
    [
      'NoSuchTransaction: nothing left to abort',
      404,
      { ok: 0, codeName: 'NoSuchTransaction', errorLabels: ['TransientTransactionError'] },
      'ok',
    ],
    ['IllegalOperation: the commit was sent', 400, { ok: 0, codeName: 'IllegalOperation' }, 'failed'],
    ['no answer', 0, null, 'failed'],
  ])('an abort answered %s', (_, status, body, kind) => {
    expect(judgeAbortAnswer(status, body).kind).toBe(kind);
  });
});

describe("teardown's check", () => {
  const account = (_id: number, balance: number, transfers: number) => ({ _id, balance, transfers });

  it('reads every balance at one ClusterTime after a count has asked every shard, and follows the cursor', () => {
    const { result, steps } = drive(checkBalances(options({ ACCOUNTS: '4', OPENING_BALANCE: '10' })), (step) => {
      if (step.path.endsWith('/count')) return { status: 200, body: { n: 4 } };
      if (step.path.endsWith('/find'))
        return { status: 200, body: { cursor: { id: '77', firstBatch: [account(0, 5, 1), account(1, 12, 2)] } } };
      return { status: 200, body: { cursor: { id: '0', nextBatch: [account(2, 13, 2), account(3, 10, 1)] } } };
    });
    expect(steps.map((step) => step.path)).toEqual(['/v1/load/transactions/count', '/v1/load/transactions/find', '/v1/cursors/77/next']);
    expect(steps[1]!.body).toMatchObject({ filter: {}, readConcern: { level: 'snapshot' } });
    expect(steps.every((step) => step.name === undefined)).toBe(true);
    expect(result).toEqual({ accounts: 4, total: 40, expected: 40, drift: 0, transfersCommitted: 3 });
  });

  it('reports money destroyed by a transfer applied on one side only, and the half transfer', () => {
    const { result } = drive(checkBalances(options({ ACCOUNTS: '2', OPENING_BALANCE: '10' })), (step) =>
      step.path.endsWith('/count')
        ? { status: 200, body: { n: 2 } }
        : { status: 200, body: { cursor: { id: '0', firstBatch: [account(0, 7, 1), account(1, 10, 0)] } } },
    );
    expect(result).toEqual({ accounts: 2, total: 17, expected: 20, drift: -3, transfersCommitted: 0.5 });
  });

  it('fails rather than report a total it did not read', () => {
    expect(() =>
      drive(checkBalances(options()), (step) =>
        step.path.endsWith('/count') ? { status: 200, body: { n: 0 } } : { status: 404, body: { ok: 0, codeName: 'NamespaceNotFound' } },
      ),
    ).toThrow('find on load.transactions answered 404');
  });
});
