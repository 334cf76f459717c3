// insert-hashed: inserts on a hashed shard key. shardCollection pre-splits the collection into
// NUM_INITIAL_CHUNKS chunks (default 2 per shard) spread over every shard, and the hashes spread
// the inserts evenly, so every shard takes writes from the first second. Expect splits on every
// shard at about the same pace and few or no migrations: the balancer has little to fix.
import exec from 'k6/execution';
import type { Options } from 'k6/options';
import {
  type SetupData,
  clusterShardCount,
  collectionSpecOf,
  insertBatch,
  parseWorkloadOptions,
  setupCollection,
  workloadThresholds,
} from './lib/index.ts';
import { commonOptions, reportTeardown, runSequence, send, summaryOutputs } from './support/k6-driver.ts';

const workload = parseWorkloadOptions('insert-hashed', __ENV);

export const options: Options = {
  scenarios: { inserts: { executor: 'constant-vus', vus: workload.vus, duration: workload.duration } },
  ...commonOptions(workload, workloadThresholds(workload)),
};

export function setup(): SetupData {
  const shards = runSequence(workload, clusterShardCount());
  return runSequence(
    workload,
    setupCollection(workload, collectionSpecOf('insert-hashed', shards), () => Date.now()),
  );
}

export default function (): void {
  send(workload, insertBatch('insert-hashed', workload, exec.scenario.iterationInTest, Math.random));
}

export function teardown(data: SetupData): void {
  reportTeardown(workload, data, { compliant: true });
}

export function handleSummary(data: unknown): Record<string, string> {
  return summaryOutputs(workload, data);
}
