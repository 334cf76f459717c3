// crud-mix: a read-mostly application on a collection that keeps growing. setup() loads SEED_DOCS
// documents (ranged key k, a scrambled id, so they cover the key space); then each iteration is
// one of 69% reads by full shard key, 20% updates by full shard key, 10% inserts and 1%
// scatter-gather finds on a field that is not the key. Reads and updates go to one shard each;
// the scatter-gather finds touch every shard, so their latency is the slowest shard's. Expect
// splits and migrations from the inserts while reads keep their latency: a migration's critical
// section shows as a short bump in p99, never as an error.
import exec from 'k6/execution';
import type { Options } from 'k6/options';
import {
  type SetupData,
  collectionSpecOf,
  crudRequest,
  parseWorkloadOptions,
  pickCrudOperation,
  seedBatches,
  sendAll,
  setupCollection,
  workloadThresholds,
} from './lib/index.ts';
import { commonOptions, reportTeardown, runSequence, send, summaryOutputs } from './support/k6-driver.ts';

const workload = parseWorkloadOptions('crud-mix', __ENV);

export const options: Options = {
  scenarios: { mix: { executor: 'constant-vus', vus: workload.vus, duration: workload.duration } },
  ...commonOptions(workload, workloadThresholds(workload)),
};

export function setup(): SetupData {
  const data = runSequence(
    workload,
    setupCollection(workload, collectionSpecOf('crud-mix', 0), () => Date.now()),
  );
  runSequence(workload, sendAll(seedBatches(workload)));
  return { ...data, startedAtMs: Date.now() };
}

export default function (): void {
  const operation = pickCrudOperation(Math.random);
  send(workload, crudRequest(operation, workload, exec.scenario.iterationInTest, Math.random));
}

export function teardown(data: SetupData): void {
  reportTeardown(workload, data, { compliant: true });
}

export function handleSummary(data: unknown): Record<string, string> {
  return summaryOutputs(workload, data);
}
