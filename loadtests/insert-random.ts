// insert-random: inserts with uniformly random ranged keys. The collection starts as one chunk on
// its primary shard; it splits everywhere as it grows and the balancer spreads the chunks over
// the shards. Expect (64 KiB chunks, the defaults) the first split within about 10 s, migrations
// from the first balancer rounds on, and the collection compliant within a minute of the load
// stopping (teardown waits up to SETTLE for that and reports how long it took).
import exec from 'k6/execution';
import type { Options } from 'k6/options';
import { type SetupData, collectionSpecOf, insertBatch, parseWorkloadOptions, setupCollection, workloadThresholds } from './lib/index.ts';
import { commonOptions, reportTeardown, runSequence, send, summaryOutputs } from './support/k6-driver.ts';

const workload = parseWorkloadOptions('insert-random', __ENV);

export const options: Options = {
  scenarios: { inserts: { executor: 'constant-vus', vus: workload.vus, duration: workload.duration } },
  ...commonOptions(workload, workloadThresholds(workload)),
};

export function setup(): SetupData {
  return runSequence(
    workload,
    setupCollection(workload, collectionSpecOf('insert-random', 0), () => Date.now()),
  );
}

export default function (): void {
  send(workload, insertBatch('insert-random', workload, exec.scenario.iterationInTest, Math.random));
}

export function teardown(data: SetupData): void {
  reportTeardown(workload, data, { compliant: true });
}

export function handleSummary(data: unknown): Record<string, string> {
  return summaryOutputs(workload, data);
}
