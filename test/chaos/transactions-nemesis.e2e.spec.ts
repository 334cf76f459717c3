/**
 * Transactions under a seeded nemesis: the bank and list-append workloads run through two
 * routers against three shards while, one fault at a time, a shard or a router is killed (-9)
 * and restarted, a shard is paused (SIGSTOP, then SIGCONT), or a chunk of either collection
 * moves. Afterwards: no anomaly in either history, every bank read summing to the opening total,
 * the final balances explained by the acknowledged transfers, and no prepared transaction left.
 * Every choice comes from the seed, printed, and a failing schedule replays with
 * TESSERA_NEMESIS_SEED (timings still vary). TESSERA_NEMESIS_SECONDS sets the length (20 s in
 * `npm test`; `npm run test:nemesis` runs 300 s).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Random, createSeededRandom } from '@tessera/core';
import { type BankOp, checkBank } from '../../tools/consistency/bank.js';
import { runBankWorkload } from '../../tools/consistency/bank-workload.js';
import type { ListTxn } from '../../tools/consistency/history.js';
import { checkListAppend } from '../../tools/consistency/list-append.js';
import { runListAppendWorkload } from '../../tools/consistency/list-append-workload.js';
import { FAST_CONFIG_ENV, eventually } from '../e2e/helpers.js';
import { RouterApi } from '../e2e/router-api.js';
import { type RoutedTestCluster, startRoutedTestCluster } from '../e2e/test-cluster.js';
import { bankSummary, preparedLeft, settledBalances, unexplainedBalances } from '../e2e/transaction-checks.js';

const SEED = /^\d+$/.test(process.env.TESSERA_NEMESIS_SEED ?? '')
  ? Number(process.env.TESSERA_NEMESIS_SEED) >>> 0
  : Math.floor(Math.random() * 2 ** 31);
const NEMESIS_MS = Number(process.env.TESSERA_NEMESIS_SECONDS ?? 20) * 1000;
const SHARDS = ['shard0', 'shard1', 'shard2'];
const BANK = 'nemesis.accounts';
const LISTS = 'nemesis.lists';
const ACCOUNTS = 30;
const OPENING = 100;
const KEYS = 30;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const t0 = Date.now();
const log = (message: string) => console.log(`[nemesis seed ${SEED} +${((Date.now() - t0) / 1000).toFixed(1)}s] ${message}`);

let t: RoutedTestCluster;
let router: RouterApi;

beforeAll(async () => {
  log(`TESSERA_NEMESIS_SEED=${SEED}, ${NEMESIS_MS / 1000} s of faults`);
  // Transactions a killed router leaves open are reaped after 5 s, not 60.
  t = await startRoutedTestCluster({
    shards: 3,
    routers: 2,
    env: { ...FAST_CONFIG_ENV, TESSERA_TRANSACTION_LIFETIME_LIMIT_SECS: '5', TESSERA_ORPHAN_CLEANUP_DELAY_SECS: '0' },
  });
  router = t.api;
  await t.config.updateSettings({ balancer: { mode: 'off' }, autoSplit: false });
  await t.config.enableSharding({ db: 'nemesis', primaryShard: 'shard0' });
  for (const [ns, count, seed] of [
    [BANK, ACCOUNTS, (i: number) => ({ _id: i, balance: OPENING })],
    [LISTS, KEYS, (i: number) => ({ _id: i, list: [] })],
  ] as const) {
    await t.config.shardCollection({ ns, key: { _id: 1 } });
    await t.config.configureCollectionBalancing({ ns, enableAutoMerger: false });
    await t.config.moveRange({ ns, min: { _id: count / 3 }, max: { _id: (2 * count) / 3 }, toShard: 'shard1' });
    await t.config.moveRange({ ns, min: { _id: (2 * count) / 3 }, max: { _id: { $maxKey: 1 } }, toShard: 'shard2' });
    await router.insertMany(
      ns,
      Array.from({ length: count }, (_, i) => seed(i)),
    );
  }
}, 180_000);

afterAll(async () => {
  await t?.stop();
});

/** One fault, chosen by `random`, held for a while and undone. */
async function fault(random: Random): Promise<void> {
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random.nextFloat() * items.length)]!;
  const hold = 300 + Math.floor(random.nextFloat() * 1_200);
  const kind = pick(['kill shard', 'kill shard', 'kill router', 'pause shard', 'move chunk', 'move chunk'] as const);
  if (kind === 'kill shard' || kind === 'kill router') {
    const node = kind === 'kill shard' ? pick(SHARDS) : pick(['router0', 'router1']);
    log(`kill -9 ${node} for ${hold} ms`);
    await t.cluster.kill(node);
    await sleep(hold);
    await t.cluster.restart(node);
    log(`${node} restarted`);
  } else if (kind === 'pause shard') {
    const node = pick(SHARDS);
    log(`SIGSTOP ${node} for ${hold} ms`);
    await t.cluster.kill(node, 'SIGSTOP');
    await sleep(hold);
    await t.cluster.kill(node, 'SIGCONT');
  } else {
    const [ns, count] = pick([
      [BANK, ACCOUNTS],
      [LISTS, KEYS],
    ] as const);
    const third = Math.floor(random.nextFloat() * 3);
    const min = (third * count) / 3;
    const toShard = pick(SHARDS);
    log(`moveRange ${ns} [${min}, ${min + count / 3}) to ${toShard}`);
    try {
      await t.config.moveRange({ ns, min: { _id: min }, max: third === 2 ? { _id: { $maxKey: 1 } } : { _id: min + count / 3 }, toShard });
    } catch (error) {
      log(`moveRange refused: ${(error as Error).message.slice(0, 160)}`);
    }
  }
}

describe('transactions under a seeded nemesis', () => {
  it(
    'keep snapshot isolation, every acknowledged transfer and no prepared transaction',
    async () => {
      const random = createSeededRandom(SEED);
      const initial = await settledBalances(t.cluster, SHARDS, router, BANK);
      let faultsDone = false;
      const bankHistory: BankOp[] = [];
      const listHistory: ListTxn[] = [];
      const routers = t.cluster.routerUrls;
      const reasons = new Map<string, number>();
      const onAbort = (reason: string) => reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
      const workloads = Promise.all([
        runBankWorkload({
          routers,
          authorization: `Bearer ${t.cluster.rootKey}`,
          ns: BANK,
          accounts: ACCOUNTS,
          transferers: 4,
          random: createSeededRandom(SEED + 1),
          done: () => faultsDone,
          onAbort,
          record: (op) => bankHistory.push(op),
        }),
        runListAppendWorkload({
          routers,
          authorization: `Bearer ${t.cluster.rootKey}`,
          ns: LISTS,
          keys: KEYS,
          clients: 4,
          maxOps: 4,
          random: createSeededRandom(SEED + 2),
          done: () => faultsDone,
          onAbort,
          record: (txn) => listHistory.push(txn),
        }),
      ]);
      const end = Date.now() + NEMESIS_MS;
      let faults = 0;
      while (Date.now() < end) {
        await sleep(500 + Math.floor(random.nextFloat() * 1_500));
        await fault(random);
        faults++;
      }
      // Quiet for a few seconds, so that the last transactions run on a whole cluster.
      await sleep(3_000);
      faultsDone = true;
      await workloads;
      log(
        `${faults} faults; bank ${JSON.stringify(bankSummary(bankHistory))}; list-append ${listHistory.filter((x) => x.status === 'ok').length} committed of ${listHistory.length}; aborts by reason ${JSON.stringify(Object.fromEntries(reasons))}`,
      );

      expect(
        checkBank(
          bankHistory,
          Array.from({ length: ACCOUNTS }, (_, i) => String(i)),
          ACCOUNTS * OPENING,
        ),
        `seed ${SEED}`,
      ).toEqual([]);
      const forbidden = checkListAppend(listHistory).anomalies.filter((a) => a.type !== 'G2-item');
      expect(
        forbidden.map((a) => a.message),
        `seed ${SEED}`,
      ).toEqual([]);
      const final = await settledBalances(t.cluster, SHARDS, router, BANK);
      expect(unexplainedBalances(bankHistory, initial, final), `seed ${SEED}`).toBeUndefined();
      await eventually(
        async () => ((await preparedLeft(t.cluster, SHARDS)) === 0 ? true : undefined),
        'no prepared transaction left',
        60_000,
      );
      expect(bankSummary(bankHistory).committed, `seed ${SEED}`).toBeGreaterThan(0);
    },
    NEMESIS_MS + 240_000,
  );
});
