// router-roll: inserts through every router of ROUTER_URLS while the routers are rolled one at a
// time (k6 cannot restart them: whoever runs the cluster does, see loadtests/README.md). Each VU
// keeps a pool of the routers, as a driver keeps a mongos list: it asks each router's hello every
// HELLO_INTERVAL of its own time, sends each insert to the next router that answered hello, and
// takes a router out when hello answers ShutdownInProgress (quiesce mode) or an insert gets no
// answer or a shutdown refusal; such an insert goes once more to the next router, with the VU's
// lsid and the same txnNumber (RETRY_WRITES). Every insert must succeed (tessera_errors,
// threshold rate==0), the pool must have seen a router quiesce (tessera_router_outs tagged
// ShutdownInProgress, count>0), and teardown counts the stored documents (tessera_documents)
// to set beside the acknowledged ones (tessera_documents_inserted).
import exec from 'k6/execution';
import type { Options } from 'k6/options';
import {
  type RollVu,
  type SetupData,
  clusterShardCount,
  collectionSpecOf,
  newRollVu,
  parseWorkloadOptions,
  rollIteration,
  setupCollection,
  workloadThresholds,
} from './lib/index.ts';
import { commonOptions, recordRoll, reportRolledDocuments, reportTeardown, runSequence, summaryOutputs } from './support/k6-driver.ts';

const workload = parseWorkloadOptions('router-roll', __ENV);

export const options: Options = {
  scenarios: { inserts: { executor: 'constant-vus', vus: workload.vus, duration: workload.duration } },
  ...commonOptions(workload, workloadThresholds(workload)),
};

// Module state is per VU (each VU runs its own copy of the script): the VU's pool and session.
let vu: RollVu | undefined;

export function setup(): SetupData {
  const shards = runSequence(workload, clusterShardCount());
  return runSequence(
    workload,
    setupCollection(workload, collectionSpecOf('router-roll', shards), () => Date.now()),
  );
}

export default function (): void {
  const { idInTest, iterationInScenario } = exec.vu;
  if (vu === undefined) vu = newRollVu(workload, idInTest, Math.random);
  recordRoll(
    runSequence(
      workload,
      rollIteration(workload, vu, iterationInScenario, () => Date.now()),
    ),
  );
}

export function teardown(data: SetupData): void {
  reportRolledDocuments(workload, data);
  reportTeardown(workload, data, { compliant: true });
}

export function handleSummary(data: unknown): Record<string, string> {
  return summaryOutputs(workload, data);
}
