// retryable-writes: every write a retryable write. Each VU makes up its own session id and numbers
// its writes with an increasing txnNumber; each iteration inserts a document of its own
// ({ _id: "vu<id>-<iteration>", n: 0 }) and applies one $inc: { n: 1 } to it. RETRY_RATE of the
// writes (0.2 by default) are sent a second time with the same lsid and txnNumber through another
// router of ROUTER_URLS (ROUTER_URL alone by default), as a driver does after a lost answer: the
// second answer must repeat the first, with the statement in retriedStmtIds. Teardown counts
// through the router the documents whose n is not 1: above 1 is a write applied twice
// (tessera_doubled_writes, threshold == 0). The collection is hashed on _id and pre-split over
// every shard, so every shard takes writes and the balancer has little to move.
import exec from 'k6/execution';
import type { Options } from 'k6/options';
import {
  type SetupData,
  type VuSession,
  clusterShardCount,
  collectionSpecOf,
  newVuSession,
  parseWorkloadOptions,
  retryableWritesIteration,
  setupCollection,
  workloadThresholds,
} from './lib/index.ts';
import { commonOptions, recordIteration, reportTeardown, reportWriteCheck, runSequence, summaryOutputs } from './support/k6-driver.ts';

const workload = parseWorkloadOptions('retryable-writes', __ENV);

export const options: Options = {
  scenarios: { writes: { executor: 'constant-vus', vus: workload.vus, duration: workload.duration } },
  ...commonOptions(workload, workloadThresholds(workload)),
};

// Module state is per VU (each VU runs its own copy of the script): the VU's one session.
let session: VuSession | undefined;

export function setup(): SetupData {
  const shards = runSequence(workload, clusterShardCount());
  return runSequence(
    workload,
    setupCollection(workload, collectionSpecOf('retryable-writes', shards), () => Date.now()),
  );
}

export default function (): void {
  if (session === undefined) session = newVuSession(exec.vu.idInTest, Math.random);
  recordIteration(runSequence(workload, retryableWritesIteration(workload, session, exec.vu.iterationInScenario, Math.random)));
}

export function teardown(data: SetupData): void {
  reportWriteCheck(workload, data);
  reportTeardown(workload, data, { compliant: true });
}

export function handleSummary(data: unknown): Record<string, string> {
  return summaryOutputs(workload, data);
}
