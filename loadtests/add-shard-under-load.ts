// add-shard-under-load: steady random-key inserts; at ADD_SHARD_AFTER (a third of DURATION by
// default) one VU adds the shard NEW_SHARD_NAME at NEW_SHARD_URL by GraphQL mutation, a shard that
// is already running but not yet a member (`npm start -- --spare-shards 1`, or docker-compose's
// shard3 under the load profile). The balancer then moves chunks to it while the inserts go on.
// No request may fail (the error threshold is rate==0, the addShard call included), and teardown
// waits up to SETTLE for the new shard to own chunks: the run fails unless it does.
import exec from 'k6/execution';
import type { Options } from 'k6/options';
import {
  type SetupData,
  addShard,
  collectionSpecOf,
  insertBatch,
  parseWorkloadOptions,
  setupCollection,
  workloadThresholds,
} from './lib/index.ts';
import { commonOptions, errors, reportTeardown, runSequence, send, summaryOutputs } from './support/k6-driver.ts';

const workload = parseWorkloadOptions('add-shard-under-load', __ENV);

export const options: Options = {
  scenarios: {
    inserts: { executor: 'constant-vus', vus: workload.vus, duration: workload.duration, exec: 'insert' },
    addShard: {
      executor: 'shared-iterations',
      vus: 1,
      iterations: 1,
      startTime: `${workload.addShardAfterMs}ms`,
      maxDuration: '60s',
      exec: 'addNewShard',
    },
  },
  ...commonOptions(workload, workloadThresholds(workload)),
};

export function setup(): SetupData {
  return runSequence(
    workload,
    setupCollection(workload, collectionSpecOf('add-shard-under-load', 0), () => Date.now()),
  );
}

export function insert(): void {
  send(workload, insertBatch('add-shard-under-load', workload, exec.scenario.iterationInTest, Math.random));
}

export function addNewShard(): void {
  try {
    const shard = runSequence(workload, addShard(workload.newShardName, workload.newShardUrl));
    console.log(`tessera: added ${shard.name} (${shard.state}) at ${workload.newShardUrl}`);
    errors.add(false, { op: 'addShard' });
  } catch (error) {
    console.error(`tessera: addShard ${workload.newShardName} ${workload.newShardUrl} failed: ${String(error)}`);
    errors.add(true, { op: 'addShard' });
  }
}

export function teardown(data: SetupData): void {
  reportTeardown(workload, data, { shardHoldsChunks: workload.newShardName });
}

export function handleSummary(data: unknown): Record<string, string> {
  return summaryOutputs(workload, data);
}
