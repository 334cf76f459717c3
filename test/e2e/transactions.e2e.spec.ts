/**
 * Cross-shard transactions on real processes (2 shards, 2 routers): MongoDB's commands and
 * error labels, snapshot isolation across shards (a transaction reads one ClusterTime on every
 * shard and meets a write conflict on a document changed after it), commit through another
 * router with the recovery token, and the bank workload checked by `checkBank`: no anomaly with
 * snapshot reads, the anomaly found when a collection's transactions read the latest versions
 * instead (a test-only failpoint), and none across a kill -9 of the coordinator shard while
 * transfers commit, after which every prepared transaction is resolved and every balance is
 * explained by the acknowledged transfers. The kill's moment comes from a seed, printed, and
 * replayed with TESSERA_TXN_KILL_SEED. A coordinator killed and left down has its transactions
 * resolved by its peer from its database: the one it had not decided aborts, the one it had
 * decided commits, and one whose commit finds it down is aborted by the router at once. Every two-phase commit here delivers its decision to the
 * other participants 100 ms after the coordinator's own, to widen the window a reader could see
 * half a transaction in.
 */
import { randomUUID } from 'node:crypto';
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSeededRandom } from '@tessera/core';
import { clusterSessionId } from '@tessera/protocol';
import { type BankOp, checkBank } from '../../tools/consistency/bank.js';
import { runBankWorkload } from '../../tools/consistency/bank-workload.js';
import type { ListTxn } from '../../tools/consistency/history.js';
import { checkListAppend } from '../../tools/consistency/list-append.js';
import { runListAppendWorkload } from '../../tools/consistency/list-append-workload.js';
import { FAST_CONFIG_ENV, controlPlane, eventually } from './helpers.js';
import { type ApiResponse, RouterApi, storedCount } from './router-api.js';
import { bankSummary, preparedLeft, settledBalances, unexplainedBalances } from './transaction-checks.js';
import { rootApi, type RoutedTestCluster, startRoutedTestCluster } from './test-cluster.js';

const NS = 'bank.accounts';
const PATH = '/v1/bank/accounts';
/** Its transactions read the latest versions, not their snapshot (failpoint shard.transactions.readLatest). */
const UNSAFE_NS = 'bank.unsafe';
/** Lists for the list-append workload, 0-4 on shard0 and 5-9 on shard1; the unsafe ones read the latest versions. */
const LISTS_NS = 'lists.safe';
const UNSAFE_LISTS_NS = 'lists.unsafe';
const KEYS = 10;
/** Sharded on `k`: below 50 on shard0, from 50 on shard1. */
const KEYED_NS = 'bank.keyed';
const KEYED_PATH = '/v1/bank/keyed';
const ACCOUNTS = 20;
const SHARDS = ['shard0', 'shard1'];
const OPENING = 100;
/** Sessions whose coordinator pauses 30 s before its decision, and after it before it tells the other participant. */
const UNDECIDED_LSID = randomUUID();
const DECIDED_LSID = randomUUID();

let t: RoutedTestCluster;
let routerA: RouterApi;
let routerB: RouterApi;

beforeAll(async () => {
  t = await startRoutedTestCluster({
    shards: 2,
    routers: 2,
    env: {
      ...FAST_CONFIG_ENV,
      TESSERA_FAILPOINTS:
        `shard.transactions.readLatest@${UNSAFE_NS}=1,shard.transactions.readLatest@${UNSAFE_LISTS_NS}=1,shard.coordinator.deliverToOthers=100,` +
        `shard.coordinator.beforeDecision@${clusterSessionId(UNDECIDED_LSID, 'root')}=30000,shard.coordinator.deliverToOthers@${clusterSessionId(DECIDED_LSID, 'root')}=30000`,
    },
  });
  routerA = t.api;
  routerB = rootApi(t.cluster, 1);
  await t.config.updateSettings({ balancer: { mode: 'off' }, autoSplit: false });
  await t.config.enableSharding({ db: 'bank', primaryShard: 'shard0' });
  for (const ns of [NS, UNSAFE_NS]) {
    await t.config.shardCollection({ ns, key: { _id: 1 } });
    await t.config.configureCollectionBalancing({ ns, enableAutoMerger: false });
    await t.config.moveRange({ ns, min: { _id: ACCOUNTS / 2 }, max: { _id: { $maxKey: 1 } }, toShard: 'shard1' });
    await routerA.insertMany(
      ns,
      Array.from({ length: ACCOUNTS }, (_, i) => ({ _id: i, balance: OPENING })),
    );
  }
  await t.config.shardCollection({ ns: KEYED_NS, key: { k: 1 } });
  await t.config.configureCollectionBalancing({ ns: KEYED_NS, enableAutoMerger: false });
  await t.config.moveRange({ ns: KEYED_NS, min: { k: 50 }, max: { k: { $maxKey: 1 } }, toShard: 'shard1' });
  await t.config.enableSharding({ db: 'lists', primaryShard: 'shard0' });
  for (const ns of [LISTS_NS, UNSAFE_LISTS_NS]) {
    await t.config.shardCollection({ ns, key: { _id: 1 } });
    await t.config.configureCollectionBalancing({ ns, enableAutoMerger: false });
    await t.config.moveRange({ ns, min: { _id: KEYS / 2 }, max: { _id: { $maxKey: 1 } }, toShard: 'shard1' });
    await routerA.insertMany(
      ns,
      Array.from({ length: KEYS }, (_, i) => ({ _id: i, list: [] })),
    );
  }
}, 120_000);

afterAll(async () => {
  await routerB?.close();
  await t?.stop();
});

/** One client session's transactions through one router, as a driver runs them. */
class Session {
  readonly lsid: { id: { $uuid: string } };
  txnNumber = 0;
  private started = false;

  constructor(
    readonly router: RouterApi,
    uuid = randomUUID(),
  ) {
    this.lsid = { id: { $uuid: uuid } };
  }

  /** The session's id in the cluster, where the shards and the control plane know it: root's (see clusterSessionId). */
  get clusterId(): string {
    return clusterSessionId(this.lsid.id.$uuid, 'root');
  }

  begin(): void {
    this.txnNumber++;
    this.started = false;
  }

  /** A statement of the current transaction; the first one starts it. */
  statement(path: string, body: Record<string, unknown>): Promise<ApiResponse> {
    const fields = { lsid: this.lsid, txnNumber: this.txnNumber, autocommit: false, ...(this.started ? {} : { startTransaction: true }) };
    this.started = true;
    return this.router.call('POST', path, { ...body, ...fields });
  }

  commit(recoveryToken?: unknown, router = this.router): Promise<ApiResponse> {
    return router.call('POST', '/v1/admin/commitTransaction', {
      lsid: this.lsid,
      txnNumber: this.txnNumber,
      autocommit: false,
      ...(recoveryToken ? { recoveryToken } : {}),
    });
  }

  abort(): Promise<ApiResponse> {
    return this.router.call('POST', '/v1/admin/abortTransaction', { lsid: this.lsid, txnNumber: this.txnNumber, autocommit: false });
  }
}

async function balances(session: Session, ids: readonly number[]): Promise<Map<number, number>> {
  const answer = await session.statement(`${PATH}/find`, { filter: { _id: { $in: [...ids] } } });
  expect(answer.status, JSON.stringify(answer.json)).toBe(200);
  const docs = (answer.json.cursor as { firstBatch: Array<{ _id: number; balance: number }> }).firstBatch;
  return new Map(docs.map((d) => [d._id, d.balance]));
}

/** A decision as transactionEvents carries it, with the shard that reported it. */
type Decision = Record<string, unknown> & { lsid?: string; shard: string };

function sortByShard<T extends { shard: string }>(items: readonly T[]): T[] {
  return [...items].sort((a, b) => a.shard.localeCompare(b.shard));
}

/** A control plane request with the admin token. */
function graphql<T>(query: string, variables: Record<string, unknown>): Promise<T> {
  return controlPlane<T>(t.cluster.configUrl, t.cluster.controlPlaneTokens.admin, query, variables);
}

const ACCOUNT_NAMES = Array.from({ length: ACCOUNTS }, (_, i) => String(i));

/** The bank workload on `ns` until `done`, with a seeded generator. */
function bank(ns: string, seed: number, done: (history: readonly BankOp[]) => boolean): Promise<BankOp[]> {
  const history: BankOp[] = [];
  return runBankWorkload({
    routers: t.cluster.routerUrls,
    authorization: `Bearer ${t.cluster.rootKey}`,
    ns,
    accounts: ACCOUNTS,
    transferers: 4,
    random: createSeededRandom(seed),
    done: () => done(history),
    record: (op) => history.push(op),
  });
}

describe('transactions through the public API', () => {
  it('commits a transfer across both shards, with a recovery token', async () => {
    const session = new Session(routerA);
    session.begin();
    const before = await balances(session, [1, ACCOUNTS - 1]);
    expect(before).toEqual(
      new Map([
        [1, OPENING],
        [ACCOUNTS - 1, OPENING],
      ]),
    );
    for (const [id, delta] of [
      [1, -10],
      [ACCOUNTS - 1, 10],
    ] as const) {
      const answer = await session.statement(`${PATH}/update`, { updates: [{ q: { _id: id }, u: { $inc: { balance: delta } } }] });
      expect(answer.json).toMatchObject({ matchedCount: 1, modifiedCount: 1, ok: 1 });
    }
    // Its own writes, read at its snapshot.
    expect(await balances(session, [1, ACCOUNTS - 1])).toEqual(
      new Map([
        [1, OPENING - 10],
        [ACCOUNTS - 1, OPENING + 10],
      ]),
    );
    // Not yet visible outside.
    expect(((await routerB.findAll(NS, { filter: { _id: 1 } })) as Array<{ balance: number }>)[0]!.balance).toBe(OPENING);
    const committed = await session.commit();
    expect(committed.status, JSON.stringify(committed.json)).toBe(200);
    expect(committed.json).toMatchObject({ ok: 1, recoveryToken: { recoveryShardId: 'shard0' } });
    // Once a commit is sent only its outcome ends the transaction, as MongoDB's routers have it.
    expect((await session.abort()).json).toMatchObject({ codeName: 'IllegalOperation' });
    // Retried through the other router with the token: the same outcome.
    const retried = await session.commit(committed.json.recoveryToken, routerB);
    expect(retried.json).toMatchObject({ ok: 1 });
    // A causal read after the commit sees both sides, though the second shard commits 100 ms later.
    const after = { readConcern: { afterClusterTime: retried.json.operationTime }, $clusterTime: retried.json.$clusterTime };
    const read = (await routerB.findAll(NS, { filter: { _id: { $in: [1, ACCOUNTS - 1] } }, ...after })) as Array<{ balance: number }>;
    expect(read.map((d) => d.balance)).toEqual([OPENING - 10, OPENING + 10]);
    expect(await preparedLeft(t.cluster, SHARDS)).toBe(0);
  });

  it('lists a transaction in the control plane while it runs, with its participants, and not after', async () => {
    const listed = async () =>
      (
        await controlPlane<{ transactions: { transactions: Array<Record<string, unknown>>; unreachableShards: string[] } }>(
          t.cluster.configUrl,
          t.cluster.controlPlaneTokens.viewer,
          '{ transactions { transactions { lsid txnNumber state ageMs namespaces participants { shard state } } unreachableShards } }',
        )
      ).transactions;
    const session = new Session(routerA);
    session.begin();
    await session.statement(`${PATH}/update`, { updates: [{ q: { _id: 5 }, u: { $set: { listed: true } } }] });
    await session.statement(`${PATH}/find`, { filter: { _id: ACCOUNTS - 5 } });
    const during = await listed();
    expect(during.unreachableShards).toEqual([]);
    const mine = during.transactions.find((x) => x.lsid === session.clusterId);
    expect(mine).toMatchObject({
      txnNumber: 1,
      state: 'inProgress',
      namespaces: [NS],
      participants: [
        { shard: 'shard0', state: 'inProgress' },
        { shard: 'shard1', state: 'inProgress' },
      ],
    });
    expect(mine!.ageMs).toBeGreaterThanOrEqual(0);
    expect((await session.commit()).status).toBe(200);
    // Committing (the other participant hears of it 100 ms later here), then gone.
    await expect.poll(async () => (await listed()).transactions.find((x) => x.lsid === session.clusterId)).toBeUndefined();
  });

  it('streams every decision on transactionEvents, and lets an operator abort an open transaction', async () => {
    const decisions: Decision[] = [];
    const client = createClient({
      url: `${t.cluster.configUrl.replace('http', 'ws')}/graphql`,
      webSocketImpl: WebSocket,
      connectionParams: { authorization: `Bearer ${t.cluster.controlPlaneTokens.viewer}` },
      retryAttempts: 0,
    });
    try {
      client.subscribe<{ transactionEvents: { kind: string; shard: string; details: { decisions: Decision[] } } }>(
        { query: 'subscription { transactionEvents(since: 0) { kind shard details } }' },
        {
          next: (v) => {
            const event = v.data!.transactionEvents;
            expect(event.kind).toBe('transaction.decisions');
            decisions.push(...event.details.decisions.map((d) => ({ ...d, shard: event.shard })));
          },
          error: () => undefined,
          complete: () => undefined,
        },
      );
      const decisionsOf = (session: Session, count: number) =>
        eventually(async () => {
          const found = decisions.filter((d) => d.lsid === session.clusterId);
          return found.length >= count ? found : undefined;
        }, `${count} decisions of ${session.lsid.id.$uuid}`);
      const onBothShards = async (session: Session) => {
        session.begin();
        await session.statement(`${PATH}/update`, { updates: [{ q: { _id: 2 }, u: { $inc: { balance: 0 } } }] });
        await session.statement(`${PATH}/update`, { updates: [{ q: { _id: ACCOUNTS - 2 }, u: { $inc: { balance: 0 } } }] });
      };

      // Two-phase commit: the coordinator's decision, with its participants and commit time.
      const committed = new Session(routerA);
      await onBothShards(committed);
      expect((await committed.commit()).status).toBe(200);
      expect(await decisionsOf(committed, 1)).toEqual([
        expect.objectContaining({
          decision: 'commit',
          by: 'coordinator',
          shard: 'shard0',
          participants: ['shard0', 'shard1'],
          commitTime: expect.anything(),
        }),
      ]);

      // The client's abort: each participant's.
      const aborted = new Session(routerA);
      await onBothShards(aborted);
      expect((await aborted.abort()).status).toBe(200);
      expect(sortByShard(await decisionsOf(aborted, 2))).toEqual([
        expect.objectContaining({ decision: 'abort', by: 'router', shard: 'shard0' }),
        expect.objectContaining({ decision: 'abort', by: 'router', shard: 'shard1' }),
      ]);

      // An operator's abort of an open transaction; resolving one that is not prepared does nothing.
      const stuck = new Session(routerA);
      await onBothShards(stuck);
      const resolved = await graphql<{ resolveTransaction: unknown[] }>(
        'mutation ($lsid: String!) { resolveTransaction(lsid: $lsid, txnNumber: 1) { shard outcome error } }',
        { lsid: stuck.clusterId },
      );
      expect(sortByShard(resolved.resolveTransaction as Decision[])).toEqual([
        { shard: 'shard0', outcome: 'notPrepared', error: null },
        { shard: 'shard1', outcome: 'notPrepared', error: null },
      ]);
      const operatorAbort = await graphql<{ abortTransaction: unknown[] }>(
        'mutation ($lsid: String!) { abortTransaction(lsid: $lsid, txnNumber: 1) { shard outcome error } }',
        { lsid: stuck.clusterId },
      );
      expect(sortByShard(operatorAbort.abortTransaction as Decision[])).toEqual([
        { shard: 'shard0', outcome: 'aborted', error: null },
        { shard: 'shard1', outcome: 'aborted', error: null },
      ]);
      expect(sortByShard(await decisionsOf(stuck, 2))).toEqual([
        expect.objectContaining({ decision: 'abort', by: 'operator', shard: 'shard0' }),
        expect.objectContaining({ decision: 'abort', by: 'operator', shard: 'shard1' }),
      ]);
      const after = await stuck.statement(`${PATH}/find`, { filter: { _id: 2 } });
      expect(after.json).toMatchObject({ codeName: 'NoSuchTransaction', errorLabels: ['TransientTransactionError'] });
    } finally {
      await client.dispose();
    }
  });

  it("changes a document's shard key inside a transaction, moving it to its new owner", async () => {
    await routerA.insertMany(KEYED_NS, [{ _id: 'moving', k: 10, v: 1 }]);
    const everywhere = async () => (await routerB.findAll(KEYED_NS, { filter: { _id: 'moving' } })) as Array<{ k: number }>;
    // Outside a transaction a new shard key value is refused, as in MongoDB.
    const outside = await routerA.call('POST', `${KEYED_PATH}/update`, { updates: [{ q: { k: 10 }, u: { $set: { k: 60 } } }] });
    expect(outside.json).toMatchObject({ matchedCount: 0, writeErrors: [{ codeName: 'IllegalOperation' }] });

    const session = new Session(routerA);
    session.begin();
    const moved = await session.statement(`${KEYED_PATH}/update`, { updates: [{ q: { k: 10 }, u: { $set: { k: 60, v: 2 } } }] });
    expect(moved.json, JSON.stringify(moved.json)).toMatchObject({ matchedCount: 1, modifiedCount: 1 });
    // The transaction sees the document on its new owner and not on its old one; no one else does yet.
    const inside = await session.statement(`${KEYED_PATH}/find`, { filter: { _id: 'moving' } });
    expect((inside.json.cursor as { firstBatch: unknown[] }).firstBatch).toEqual([{ _id: 'moving', k: 60, v: 2 }]);
    expect(await everywhere()).toEqual([{ _id: 'moving', k: 10, v: 1 }]);
    // Within one owner's range the change stays in place.
    const again = await session.statement(`${KEYED_PATH}/update`, { updates: [{ q: { k: 60 }, u: { $set: { k: 70 } } }] });
    expect(again.json).toMatchObject({ matchedCount: 1, modifiedCount: 1 });
    const committed = await session.commit();
    expect(committed.status).toBe(200);
    // A causal read after the commit (the other participant commits 100 ms after the coordinator here).
    const after = { readConcern: { afterClusterTime: committed.json.operationTime }, $clusterTime: committed.json.$clusterTime };
    expect(await routerB.findAll(KEYED_NS, { filter: { _id: 'moving' }, ...after })).toEqual([{ _id: 'moving', k: 70, v: 2 }]);
    // Stored once, on shard1 only: the delete on shard0 committed with the insert.
    expect([await storedCount(t.cluster, 'shard0', KEYED_NS), await storedCount(t.cluster, 'shard1', KEYED_NS)]).toEqual([0, 1]);
  });

  it('aborts: nothing of the transaction stays', async () => {
    const session = new Session(routerA);
    session.begin();
    await session.statement(`${PATH}/update`, { updates: [{ q: { _id: 2 }, u: { $inc: { balance: -50 } } }] });
    await session.statement(`${PATH}/insert`, { documents: [{ _id: 1_000, balance: 50 }] });
    expect((await session.abort()).json).toMatchObject({ ok: 1 });
    expect(await routerA.findAll(NS, { filter: { _id: { $in: [2, 1_000] } } })).toEqual([{ _id: 2, balance: OPENING }]);
    const late = await session.statement(`${PATH}/find`, { filter: { _id: 2 } });
    expect(late.json).toMatchObject({ codeName: 'NoSuchTransaction', errorLabels: ['TransientTransactionError'] });
  });

  it('reads one snapshot across shards and meets a write conflict on what changed after it', async () => {
    const session = new Session(routerA);
    session.begin();
    const before = await balances(session, [3]);
    const outside = await routerB.call('POST', `${PATH}/update`, { updates: [{ q: { _id: 3 }, u: { $set: { audited: true } } }] });
    expect(outside.json).toMatchObject({ modifiedCount: 1 });
    // Still the snapshot's version, on this shard and the other.
    const seen = await session.statement(`${PATH}/find`, { filter: { _id: { $in: [3, ACCOUNTS - 3] } } });
    expect((seen.json.cursor as { firstBatch: unknown[] }).firstBatch).toEqual([
      { _id: 3, balance: before.get(3)! },
      { _id: ACCOUNTS - 3, balance: OPENING },
    ]);
    const conflict = await session.statement(`${PATH}/update`, { updates: [{ q: { _id: 3 }, u: { $inc: { balance: -1 } } }] });
    expect(conflict.status).toBe(409);
    expect(conflict.json).toMatchObject({ codeName: 'WriteConflict', errorLabels: ['TransientTransactionError'] });
    // The conflict aborted the transaction.
    expect((await session.commit()).json).toMatchObject({ codeName: 'NoSuchTransaction' });
  });

  it('keeps every total right under concurrent transfers, read inside transactions (checkBank)', async () => {
    const initial = await settledBalances(t.cluster, SHARDS, routerA, NS);
    const until = Date.now() + 4_000;
    const history = await bank(NS, 27, () => Date.now() > until);
    const summary = bankSummary(history);
    expect(checkBank(history, ACCOUNT_NAMES, ACCOUNTS * OPENING)).toEqual([]);
    expect(summary.reads, JSON.stringify(summary)).toBeGreaterThan(3);
    expect(summary.committed, JSON.stringify(summary)).toBeGreaterThan(5);
    expect(unexplainedBalances(history, initial, await settledBalances(t.cluster, SHARDS, routerA, NS))).toBeUndefined();
  }, 60_000);

  it('finds half-committed transfers when transactions read the latest versions instead of their snapshot', async () => {
    const until = Date.now() + 20_000;
    const history = await bank(UNSAFE_NS, 28, (h) => Date.now() > until || checkBank(h, ACCOUNT_NAMES, ACCOUNTS * OPENING).length > 0);
    const anomalies = checkBank(history, ACCOUNT_NAMES, ACCOUNTS * OPENING);
    expect(anomalies.map((a) => a.type)).toContain('wrong-total');
  }, 60_000);
});

/** The list-append workload on `ns` until `done`, with a seeded generator. */
function listAppend(ns: string, seed: number, done: (history: readonly ListTxn[]) => boolean): Promise<ListTxn[]> {
  const history: ListTxn[] = [];
  return runListAppendWorkload({
    routers: t.cluster.routerUrls,
    authorization: `Bearer ${t.cluster.rootKey}`,
    ns,
    keys: KEYS,
    clients: 4,
    maxOps: 4,
    random: createSeededRandom(seed),
    done: () => done(history),
    record: (txn) => history.push(txn),
  });
}

describe('the list-append workload (checkListAppend)', () => {
  it('finds no anomaly snapshot isolation forbids (all but G2-item, write skew)', async () => {
    const until = Date.now() + 4_000;
    const history = await listAppend(LISTS_NS, 29, () => Date.now() > until);
    const { anomalies } = checkListAppend(history);
    expect(anomalies.filter((a) => a.type !== 'G2-item').map((a) => a.message)).toEqual([]);
    expect(history.filter((txn) => txn.status === 'ok').length).toBeGreaterThan(10);
  }, 60_000);

  it('finds read skew when transactions read the latest versions instead of their snapshot', async () => {
    const until = Date.now() + 20_000;
    const forbidden = (h: readonly ListTxn[]) => checkListAppend(h).anomalies.filter((a) => a.type !== 'G2-item');
    const history = await listAppend(UNSAFE_LISTS_NS, 30, (h) => Date.now() > until || (h.length % 10 === 0 && forbidden(h).length > 0));
    expect(forbidden(history).length).toBeGreaterThan(0);
  }, 60_000);
});

describe('a kill -9 of the coordinator shard while transfers commit', () => {
  it('loses no acknowledged transfer, half-applies none and leaves no prepared transaction', async () => {
    const seed = Number(process.env.TESSERA_TXN_KILL_SEED ?? Math.floor(Math.random() * 2 ** 31));
    console.log(`transactions kill test: TESSERA_TXN_KILL_SEED=${seed}`);
    const random = createSeededRandom(seed);
    const initial = await settledBalances(t.cluster, SHARDS, routerA, NS);
    const killAfterMs = 500 + Math.floor(random.nextFloat() * 2_000);
    let restarted = 0;
    const fault = (async () => {
      await new Promise((resolve) => setTimeout(resolve, killAfterMs));
      await t.cluster.kill('shard0');
      await new Promise((resolve) => setTimeout(resolve, 500 + Math.floor(random.nextFloat() * 1_000)));
      await t.cluster.restart('shard0');
      restarted = Date.now();
    })();
    const history = await bank(NS, seed, () => restarted > 0 && Date.now() > restarted + 3_000);
    await fault;
    expect(checkBank(history, ACCOUNT_NAMES, ACCOUNTS * OPENING), `seed ${seed}`).toEqual([]);
    const final = await settledBalances(t.cluster, SHARDS, routerA, NS);
    expect(unexplainedBalances(history, initial, final), `seed ${seed}: ${JSON.stringify(bankSummary(history))}`).toBeUndefined();
    expect(bankSummary(history).committed).toBeGreaterThan(0);
  }, 120_000);
});

describe('a coordinator shard killed and left down', () => {
  it('has its transactions resolved from its database: the undecided aborted, the decided committed', async () => {
    const transfer = async (uuid: `${string}-${string}-${string}-${string}-${string}`, from: number, to: number, amount: number) => {
      const session = new Session(routerA, uuid);
      session.begin();
      for (const [id, delta] of [
        [from, -amount],
        [to, amount],
      ] as const) {
        const answer = await session.statement(`${PATH}/update`, { updates: [{ q: { _id: id }, u: { $inc: { balance: delta } } }] });
        expect(answer.json).toMatchObject({ modifiedCount: 1 });
      }
      return session;
    };
    const before = await settledBalances(t.cluster, SHARDS, routerA, NS);
    // Every transfer runs its statements before the undecided one prepares: a statement whose
    // snapshot is at or past a prepared transaction's time waits on that shard until it is
    // resolved, and the router may have heard of that time already.
    // Not yet committing: its commit will find the coordinator down.
    const uncommitted = await transfer(randomUUID(), 5, ACCOUNTS - 5, 2);
    // Decided: shard0 (the coordinator) recorded commit and committed its part; shard1 would hear
    // of it 30 s later, and asks on its own only after TESSERA_TRANSACTION_RESOLVE_AFTER_MS (1 s).
    const decided = await transfer(DECIDED_LSID, 3, ACCOUNTS - 3, 7);
    // Undecided: both participants prepared, no decision recorded (its coordinator pauses).
    const undecided = await transfer(UNDECIDED_LSID, 4, ACCOUNTS - 4, 11);
    const commit = undecided.commit();
    await eventually(async () => ((await preparedLeft(t.cluster, SHARDS)) === 2 ? true : undefined), 'both parts prepared');
    expect((await decided.commit()).status).toBe(200);
    expect(await preparedLeft(t.cluster, SHARDS)).toBe(3);
    await t.cluster.kill('shard0');
    const killed = Date.now();
    await eventually(async () => ((await preparedLeft(t.cluster, SHARDS)) === 0 ? true : undefined), 'every prepared part resolved');
    console.log(`coordinator left down: every prepared part resolved ${Date.now() - killed} ms after its kill`);
    expect((await commit).json).toMatchObject({ errorLabels: ['UnknownTransactionCommitResult'] });
    // The coordinator never got this commit, so no two-phase commit began: the router aborts the
    // transaction on shard1 at once (not at its lifetime limit), and says so.
    expect((await uncommitted.commit()).json).toMatchObject({ codeName: 'NoSuchTransaction', errorLabels: ['TransientTransactionError'] });
    const next = new Session(routerA);
    next.begin();
    const free = await next.statement(`${PATH}/update`, { updates: [{ q: { _id: ACCOUNTS - 5 }, u: { $inc: { balance: 0 } } }] });
    expect(free.json).toMatchObject({ ok: 1, matchedCount: 1 });
    expect((await next.commit()).status).toBe(200);
    const onShard1 = (await routerB.findAll(NS, { filter: { _id: { $in: [ACCOUNTS - 4, ACCOUNTS - 3] } } })) as Array<{ balance: number }>;
    expect(onShard1.map((d) => d.balance)).toEqual([before.get(String(ACCOUNTS - 4)), before.get(String(ACCOUNTS - 3))! + 7]);

    await t.cluster.restart('shard0');
    // The restarted coordinator answers from its database what its peers found there.
    expect((await undecided.commit()).json).toMatchObject({ codeName: 'NoSuchTransaction' });
    expect((await decided.commit()).json).toMatchObject({ ok: 1 });
    const after = await settledBalances(t.cluster, SHARDS, routerA, NS);
    expect([3, 4, 5, ACCOUNTS - 5, ACCOUNTS - 4, ACCOUNTS - 3].map((id) => after.get(String(id)))).toEqual([
      before.get('3')! - 7,
      before.get('4'),
      before.get('5'),
      before.get(String(ACCOUNTS - 5)),
      before.get(String(ACCOUNTS - 4)),
      before.get(String(ACCOUNTS - 3))! + 7,
    ]);
  }, 120_000);
});
