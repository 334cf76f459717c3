// insert-monotonic: inserts with an increasing shard key, the hot-spot case. Every insert lands
// in the top chunk, which auto-splits at its highest key (the top-chunk optimization), so the new
// top chunk is small and the balancer moves full chunks off the hot shard. Expect splits within
// seconds and a steady trickle of migrations; the hot shard stays the one taking writes.
import exec from 'k6/execution';
import type { Options } from 'k6/options';
import { type SetupData, collectionSpecOf, insertBatch, parseWorkloadOptions, setupCollection, workloadThresholds } from './lib/index.ts';
import { commonOptions, reportTeardown, runSequence, send, summaryOutputs } from './support/k6-driver.ts';

const workload = parseWorkloadOptions('insert-monotonic', __ENV);

export const options: Options = {
  scenarios: { inserts: { executor: 'constant-vus', vus: workload.vus, duration: workload.duration } },
  ...commonOptions(workload, workloadThresholds(workload)),
};

export function setup(): SetupData {
  return runSequence(
    workload,
    setupCollection(workload, collectionSpecOf('insert-monotonic', 0), () => Date.now()),
  );
}

export default function (): void {
  send(workload, insertBatch('insert-monotonic', workload, exec.scenario.iterationInTest, Math.random));
}

export function teardown(data: SetupData): void {
  reportTeardown(workload, data, { compliant: true });
}

export function handleSummary(data: unknown): Record<string, string> {
  return summaryOutputs(workload, data);
}
