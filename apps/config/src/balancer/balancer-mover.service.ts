import { Injectable } from '@nestjs/common';
import type { MigrationPlan, ShardId, ShardKeyPattern } from '@tessera/core';
import type { ClusterSettings } from '@tessera/protocol';
import { MigrationManagerService } from '../migration/migration-manager.service.js';
import { wireKey } from './balancer-round.js';
import { BalancerThrottleService } from './balancer-throttle.service.js';
import { ClusterStatisticsService } from './cluster-statistics.service.js';

/**
 * Issues the balancer's migrations (a round's and the top-chunk moves) through moveRange, with
 * their reason, and knows which shards are in one of them now: a shard takes part in one
 * migration at a time, so the policies count these shards busy. Each one's start and end go to
 * the throttle (`BalancerThrottleService`), and the bytes each moved to the snapshot's view of
 * the shards' bytes (`ClusterStatisticsService.noteMigration`).
 */
@Injectable()
export class BalancerMover {
  /** Shards in a migration this balancer issued, with how many. */
  private readonly migratingShards = new Map<string, number>();

  constructor(
    private readonly migrations: MigrationManagerService,
    private readonly throttle: BalancerThrottleService,
    private readonly statistics: ClusterStatisticsService,
  ) {}

  busyShards(): ReadonlySet<ShardId> {
    return new Set(this.migratingShards.keys());
  }

  /** Issues one migration through moveRange, with its reason, counting its shards busy meanwhile. */
  async move(plan: MigrationPlan, pattern: ShardKeyPattern, settings: ClusterSettings): Promise<void> {
    const shards = [plan.from, plan.to];
    for (const s of shards) this.migratingShards.set(s, (this.migratingShards.get(s) ?? 0) + 1);
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
      for (const s of shards) {
        const n = (this.migratingShards.get(s) ?? 1) - 1;
        if (n <= 0) this.migratingShards.delete(s);
        else this.migratingShards.set(s, n);
      }
    }
  }
}
