// transactions: the bank. Setup opens ACCOUNTS accounts (100 by default) of OPENING_BALANCE each in
// a collection hashed on _id and pre-split over every shard. Each VU makes up its own session id
// and numbers its transactions with an increasing txnNumber; each iteration moves 1 to 5 from one
// random account to another in one transaction through one router of ROUTER_URLS: find the payer
// (startTransaction), $inc it by -amount, $inc the payee by +amount, commitTransaction. A payer
// short of the amount aborts (abortTransaction). TransientTransactionError runs the transaction
// again under a new txnNumber (MAX_TXN_RETRIES times at most), UnknownTransactionCommitResult
// sends the commit again. Teardown reads every balance at one ClusterTime: the total must still be
// ACCOUNTS × OPENING_BALANCE (tessera_balance_drift, threshold == 0), or a transaction was applied
// in part.
import exec from 'k6/execution';
import type { Options } from 'k6/options';
import {
  type SetupData,
  type TxnSession,
  clusterShardCount,
  collectionSpecOf,
  newTxnSession,
  openAccounts,
  parseWorkloadOptions,
  setupCollection,
  transferIteration,
  workloadThresholds,
} from './lib/index.ts';
import { commonOptions, recordTransfer, reportBalanceCheck, reportTeardown, runSequence, summaryOutputs } from './support/k6-driver.ts';

const workload = parseWorkloadOptions('transactions', __ENV);

export const options: Options = {
  scenarios: { transfers: { executor: 'constant-vus', vus: workload.vus, duration: workload.duration } },
  ...commonOptions(workload, workloadThresholds(workload)),
};

// Module state is per VU (each VU runs its own copy of the script): the VU's one session.
let session: TxnSession | undefined;

export function setup(): SetupData {
  const shards = runSequence(workload, clusterShardCount());
  const data = runSequence(
    workload,
    setupCollection(workload, collectionSpecOf('transactions', shards), () => Date.now()),
  );
  runSequence(workload, openAccounts(workload));
  // The load starts once the accounts are open.
  return { ...data, startedAtMs: Date.now() };
}

export default function (): void {
  if (session === undefined) session = newTxnSession(exec.vu.idInTest, Math.random);
  recordTransfer(
    runSequence(
      workload,
      transferIteration(workload, session, exec.vu.iterationInScenario, Math.random, () => Date.now()),
    ),
  );
}

export function teardown(data: SetupData): void {
  reportBalanceCheck(workload, data);
  reportTeardown(workload, data, { compliant: true });
}

export function handleSummary(data: unknown): Record<string, string> {
  return summaryOutputs(workload, data);
}
