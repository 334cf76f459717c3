import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { type MigrationPlan, parseShardKeyPattern } from '@tessera/core';
import { DEFAULT_CLUSTER_SETTINGS, type MoveRangeResult } from '@tessera/protocol';
import { FakeNetwork } from '../../../../test/fakes/fake-network.js';
import type { BalancerMoveOptions, MigrationManagerService } from '../migration/migration-manager.service.js';
import { BalancerMover } from './balancer-mover.service.js';
import type { BalancerThrottleService } from './balancer-throttle.service.js';
import type { ClusterStatisticsService } from './cluster-statistics.service.js';

const PLAN: MigrationPlan = {
  namespace: 'db.c',
  range: { min: [0], max: [10] },
  from: 'shard0',
  to: 'shard1',
  reason: 'imbalance',
};
const RECIPIENT = 'http://shard1';
const PACING_PATH = '/internal/migration/recvChunkPacing';

/** A mover whose moveRange registers migration `m1` on RECIPIENT and runs until `finish` is called. */
function harness() {
  const network = new FakeNetwork();
  network.node(RECIPIENT).on('POST', PACING_PATH, () => ({ applied: true }));
  let finish: () => void = () => undefined;
  const migrations = {
    moveRange: (_input: unknown, options: BalancerMoveOptions) =>
      new Promise<MoveRangeResult>((resolve) => {
        options.onRegistered?.({ migrationId: 'm1', recipientUrl: RECIPIENT });
        finish = () => resolve({ bytesCloned: 0 } as MoveRangeResult);
      }),
  } as unknown as MigrationManagerService;
  const throttle = { started: () => undefined, ended: () => undefined, clonePacing: () => undefined } as unknown as BalancerThrottleService;
  const statistics = { noteMigration: () => undefined } as unknown as ClusterStatisticsService;
  const mover = new BalancerMover(migrations, throttle, statistics, network.internalClients(), pino({ level: 'silent' }));
  return { network, mover, finish: () => finish() };
}

describe('BalancerMover.repace', () => {
  it("hands the throttle's new pacing to the recipient of each migration under way, and none once it ended", async () => {
    const { network, mover, finish } = harness();
    const moving = mover.move(PLAN, parseShardKeyPattern({ x: 1 }), DEFAULT_CLUSTER_SETTINGS);
    await mover.repace({ batchDocuments: 500, waitRatio: 2 });
    await mover.repace(undefined);
    expect(network.callsTo(PACING_PATH).map((c) => c.body)).toEqual([
      { migrationId: 'm1', clonePacing: { batchDocuments: 500, waitRatio: 2 } },
      { migrationId: 'm1', clonePacing: null },
    ]);
    finish();
    await moving;
    await mover.repace({ batchDocuments: 500, waitRatio: 1 });
    expect(network.callsTo(PACING_PATH)).toHaveLength(2);
  });

  it('does not fail when a recipient does not answer: that migration keeps its pacing', async () => {
    const { network, mover } = harness();
    void mover.move(PLAN, parseShardKeyPattern({ x: 1 }), DEFAULT_CLUSTER_SETTINGS);
    network.failNth({ path: PACING_PATH, fault: 'unreachable' });
    await expect(mover.repace({ batchDocuments: 500, waitRatio: 1 })).resolves.toBeUndefined();
  });
});
