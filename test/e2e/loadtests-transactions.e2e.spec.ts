import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type BalanceCheck,
  type Sequence,
  type StepAnswer,
  type TransferOutcome,
  type WorkloadOptions,
  checkBalances,
  collectionSpecOf,
  newTxnSession,
  openAccounts,
  parseWorkloadOptions,
  seededRandom,
  setupCollection,
  transferIteration,
} from '../../loadtests/lib/index.ts';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';
import { NO_ANSWER, type RouterStep, runSequence, sendToRouter } from './k6-sequence-driver.js';
import { FAST_CONFIG_ENV, waitForLeader } from './helpers.js';
import { startTestCluster } from './test-cluster.js';

// The transactions workload's logic (loadtests/lib/transactions.ts) driven from Node against two
// real routers: the transfers the k6 script runs, several VUs side by side, each with its own
// session, over a network that loses requests and answers: every fifth credit never arrives (the
// transaction must run again), and the answer to every fourth transaction's first commit is lost
// after the commit went out (the commit must be sent again). Teardown's check then finds the
// opening total, and as many committed transfers in the data as the client counted. Then the same
// load from a client that sends each statement on its own, outside any transaction, over the same
// network: every lost credit destroys its amount, and the check must report exactly that much. A
// check that cannot see money destroyed would prove nothing.

/** What a client does with a router step: sends it (as built, or changed) and hands back the answer or loses it, or answers it itself. */
type Handling = { send: RouterStep; loseAnswer?: boolean } | { answer: StepAnswer };
type Client = (step: RouterStep) => Handling;

let cluster: LocalCluster;
let dispose: () => Promise<void>;
let options: WorkloadOptions;

beforeAll(async () => {
  ({ cluster, dispose } = await startTestCluster({ shards: 2, routers: 2, env: FAST_CONFIG_ENV }));
  await waitForLeader(cluster.configClient());
  // Few accounts and little money in each: transfers meet on the same accounts (write conflicts)
  // and payers run short (aborts on purpose).
  options = parseWorkloadOptions('transactions', {
    ROUTER_URL: cluster.routerUrls[0],
    ROUTER_URLS: cluster.routerUrls.join(','),
    CONFIG_URL: cluster.configUrl,
    ADMIN_TOKEN: cluster.controlPlaneTokens.admin,
    API_KEY: cluster.rootKey,
    ACCOUNTS: '20',
    OPENING_BALANCE: '5',
    VUS: '4',
  });
});

afterAll(async () => {
  await dispose?.();
});

/** The Node driver of a lib sequence (see k6-sequence-driver.ts), its router steps through `client`. */
function run<T>(sequence: Sequence<T>, client: Client = (step) => ({ send: step })): Promise<T> {
  return runSequence(options, sequence, async (step) => {
    const handling = client(step);
    if ('answer' in handling) return handling.answer;
    const sent = await sendToRouter(options, handling.send);
    return handling.loseAnswer === true ? NO_ANSWER : sent;
  });
}

/** The k6 scenario: `settings.vus` VUs side by side, each with its own session, `iterations` transfers each. */
async function runVus(
  settings: WorkloadOptions,
  seed: number,
  iterations: number,
  client: Client,
): Promise<{ outcomes: TransferOutcome[]; ms: number }> {
  const started = Date.now();
  const outcomes: TransferOutcome[] = [];
  await Promise.all(
    Array.from({ length: settings.vus }, async (_, i) => {
      const vuId = i + 1;
      const random = seededRandom(seed + vuId);
      const session = newTxnSession(vuId, random);
      for (let iteration = 0; iteration < iterations; iteration++)
        outcomes.push(
          await run(
            transferIteration(settings, session, iteration, random, () => Date.now()),
            client,
          ),
        );
    }),
  );
  return { outcomes, ms: Date.now() - started };
}

/**
 * A network that loses every fifth credit before it arrives, and the answer to every fourth
 * transaction's first commit after the commit went out; it keeps what it lost.
 */
function lossyNetwork(): { client: Client; lostCredits: RouterStep[]; lostCommitAnswers: () => number } {
  const lostCredits: RouterStep[] = [];
  const commitsSeen = new Set<string>();
  let lostCommits = 0;
  let credits = 0;
  const client: Client = (step) => {
    if (step.name === 'credit' && ++credits % 5 === 0) {
      lostCredits.push(step);
      return { answer: NO_ANSWER };
    }
    if (step.name === 'commitTransaction') {
      const { lsid, txnNumber } = step.body as { lsid: { id: { $uuid: string } }; txnNumber: number };
      const transaction = `${lsid.id.$uuid}/${txnNumber}`;
      if (!commitsSeen.has(transaction)) {
        commitsSeen.add(transaction);
        if (commitsSeen.size % 4 === 0) {
          lostCommits++;
          return { send: step, loseAnswer: true };
        }
      }
    }
    return { send: step };
  };
  return { client, lostCredits, lostCommitAnswers: () => lostCommits };
}

/**
 * The broken client: it believes it runs transactions, but sends every statement on its own
 * (without lsid, txnNumber and autocommit, so each commits by itself) and answers commit and abort
 * itself.
 */
function withoutTransactions(network: Client): Client {
  return (step) => {
    if (step.name === 'commitTransaction' || step.name === 'abortTransaction') return { answer: { status: 200, body: { ok: 1 } } };
    const {
      lsid: _lsid,
      txnNumber: _txnNumber,
      autocommit: _autocommit,
      startTransaction: _start,
      ...command
    } = step.body as Record<string, unknown>;
    return network({ ...step, body: command });
  };
}

const count = (outcomes: TransferOutcome[], end: TransferOutcome['end']) => outcomes.filter((o) => o.end === end).length;
const total = (outcomes: TransferOutcome[], field: 'txnRetries' | 'commitRetries') => outcomes.reduce((sum, o) => sum + o[field], 0);
const aborts = (outcomes: TransferOutcome[]) => outcomes.flatMap((o) => o.aborts);
const failures = (outcomes: TransferOutcome[]) => outcomes.flatMap((o) => o.sends.filter((s) => !s.ok));
const amountOf = (credit: RouterStep) =>
  (credit.body as { updates: Array<{ u: { $inc: { balance: number } } }> }).updates[0]!.u.$inc.balance;

function describeLoad(outcomes: TransferOutcome[], ms: number, check: BalanceCheck): string {
  const reasons: Record<string, number> = {};
  for (const reason of aborts(outcomes)) reasons[reason] = (reasons[reason] ?? 0) + 1;
  return (
    `${outcomes.length} transfers in ${ms} ms: ${count(outcomes, 'committed')} committed, ${count(outcomes, 'overdrawn')} overdrawn, ` +
    `${count(outcomes, 'gaveUp')} given up; aborts ${JSON.stringify(reasons)}; ${total(outcomes, 'txnRetries')} transactions and ` +
    `${total(outcomes, 'commitRetries')} commits sent again; check ${JSON.stringify(check)}`
  );
}

describe('the transactions workload against two routers', () => {
  const ITERATIONS = 25;

  it('transfers survive lost statements and lost commit answers, and teardown finds every unit of money and every committed transfer', async () => {
    await run(setupCollection(options, collectionSpecOf('transactions', 2), () => Date.now()));
    await run(openAccounts(options));
    const network = lossyNetwork();
    const load = await runVus(options, 1000, ITERATIONS, network.client);
    const check = await run(checkBalances(options));
    console.log(`loadtests e2e (transactions): ${describeLoad(load.outcomes, load.ms, check)}`);

    const committed = count(load.outcomes, 'committed');
    expect(failures(load.outcomes)).toEqual([]);
    expect(count(load.outcomes, 'failed') + count(load.outcomes, 'unknown')).toBe(0);
    expect(committed).toBeGreaterThan(0);
    expect(count(load.outcomes, 'overdrawn')).toBeGreaterThan(0);
    // Each lost credit aborted its attempt, and its transaction ran again unless it was the last attempt allowed.
    expect(network.lostCredits.length).toBeGreaterThan(0);
    expect(aborts(load.outcomes).filter((reason) => reason === 'unreachable')).toHaveLength(network.lostCredits.length);
    expect(total(load.outcomes, 'txnRetries')).toBeGreaterThanOrEqual(network.lostCredits.length - count(load.outcomes, 'gaveUp'));
    // Each lost commit answer was asked again once and answered committed.
    expect(network.lostCommitAnswers()).toBeGreaterThan(0);
    expect(total(load.outcomes, 'commitRetries')).toBe(network.lostCommitAnswers());
    expect(check).toEqual({
      accounts: options.accounts,
      total: options.accounts * options.openingBalance,
      expected: options.accounts * options.openingBalance,
      drift: 0,
      transfersCommitted: committed,
    });
  }, 120_000);

  it('a client that runs the statements outside a transaction destroys the money of each lost credit, and teardown’s check reports it', async () => {
    // Its own collection: dropping and re-creating the first one makes shard0 refuse the inserts
    // (InternalError: collections_ns_key), a cluster bug this file does not cover.
    const broken = { ...options, ns: 'load.transactions_broken' };
    await run(setupCollection(broken, collectionSpecOf('transactions', 2), () => Date.now()));
    await run(openAccounts(broken));
    const network = lossyNetwork();
    const load = await runVus(broken, 2000, ITERATIONS, withoutTransactions(network.client));
    const check = await run(checkBalances(broken));
    const destroyed = network.lostCredits.reduce((sum, credit) => sum + amountOf(credit), 0);
    console.log(
      `loadtests e2e (transactions, no transaction): ${network.lostCredits.length} credits lost (${destroyed} destroyed); ${describeLoad(load.outcomes, load.ms, check)}`,
    );

    expect(network.lostCredits.length).toBeGreaterThan(0);
    // The client saw nothing wrong: only the check can tell.
    expect(failures(load.outcomes)).toEqual([]);
    // Each lost credit's debit stood alone: exactly its amount is gone, and half its transfer is in the data.
    expect(check.drift).toBe(-destroyed);
    expect(check.total).toBe(broken.accounts * broken.openingBalance - destroyed);
    expect(check.transfersCommitted).toBe(count(load.outcomes, 'committed') + network.lostCredits.length / 2);
  }, 120_000);
});
