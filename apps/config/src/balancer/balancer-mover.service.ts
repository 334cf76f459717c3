import { Injectable } from '@nestjs/common';
import type { MigrationPlan, ShardId, ShardKeyPattern } from '@tessera/core';
import type { ClusterSettings } from '@tessera/protocol';
import { MigrationManagerService } from '../migration/migration-manager.service.js';
import { wireKey } from './balancer-round.js';
import { BalancerThrottleService } from './balancer-throttle.service.js';
import { ClusterStatisticsService } from './cluster-statistics.service.js';

/**
 * Issues the balancer's migrations (a round's and the top-chunk moves) through moveRange, with
 * their reason, and knows which are under way: the policies plan around their donors and
 * recipients (`MigrationSlots`). Each one's start and end go to
 * the throttle (`BalancerThrottleService`), and the bytes each moved to the snapshot's view of
 * the shards' bytes (`ClusterStatisticsService.noteMigration`).
 */
@Injectable()
export class BalancerMover {
  /** The migrations this balancer issued that have not ended. */
  readonly underWay = new Set<MigrationPlan>();

  constructor(
    private readonly migrations: MigrationManagerService,
    private readonly throttle: BalancerThrottleService,
    private readonly statistics: ClusterStatisticsService,
  ) {}

  /** Every shard in a migration under way, whatever its role. */
  busyShards(): ReadonlySet<ShardId> {
    return new Set([...this.underWay].flatMap((m) => [m.from, m.to]));
  }

  /** Issues one migration through moveRange, with its reason, counting it under way meanwhile. */
  async move(plan: MigrationPlan, pattern: ShardKeyPattern, settings: ClusterSettings): Promise<void> {
    this.underWay.add(plan);
    this.throttle.started(plan.estimatedSizeBytes ?? 0);
    let cloned = 0;
    try {
      const result = await this.migrations.moveRange(
        {
          ns: plan.namespace,
          min: wireKey(pattern, plan.range.min),
          toShard: plan.to,
          // attemptToBalanceJumboChunks: a chunk over the size limit moves rather than being refused.
          forceJumbo: settings.balancer.attemptToBalanceJumboChunks,
          waitForDelete: settings.balancer.waitForDelete,
        },
        { reason: plan.reason, clonePacing: this.throttle.clonePacing() },
      );
      cloned = result.bytesCloned;
      this.statistics.noteMigration(plan.namespace, plan.from, plan.to, cloned);
    } finally {
      this.throttle.ended(cloned);
      this.underWay.delete(plan);
    }
  }
}
