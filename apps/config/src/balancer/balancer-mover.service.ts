import { Injectable } from '@nestjs/common';
import type { MigrationPlan, ShardId, ShardKeyPattern } from '@tessera/core';
import type { ClusterSettings } from '@tessera/protocol';
import { MigrationManagerService } from '../migration/migration-manager.service.js';
import { wireKey } from './balancer-round.js';

/**
 * Issues the balancer's migrations (a round's and the top-chunk moves) through moveRange, with
 * their reason, and knows which shards are in one of them now: a shard takes part in one
 * migration at a time, so the policies count these shards busy.
 */
@Injectable()
export class BalancerMover {
  /** Shards in a migration this balancer issued, with how many. */
  private readonly migratingShards = new Map<string, number>();

  constructor(private readonly migrations: MigrationManagerService) {}

  busyShards(): ReadonlySet<ShardId> {
    return new Set(this.migratingShards.keys());
  }

  /** Issues one migration through moveRange, with its reason, counting its shards busy meanwhile. */
  async move(plan: MigrationPlan, pattern: ShardKeyPattern, settings: ClusterSettings): Promise<void> {
    const shards = [plan.from, plan.to];
    for (const s of shards) this.migratingShards.set(s, (this.migratingShards.get(s) ?? 0) + 1);
    try {
      await this.migrations.moveRange(
        {
          ns: plan.namespace,
          min: wireKey(pattern, plan.range.min),
          toShard: plan.to,
          // attemptToBalanceJumboChunks: a chunk over the size limit moves rather than being refused.
          forceJumbo: settings.balancer.attemptToBalanceJumboChunks,
          waitForDelete: settings.balancer.waitForDelete,
        },
        { reason: plan.reason },
      );
    } finally {
      for (const s of shards) {
        const n = (this.migratingShards.get(s) ?? 1) - 1;
        if (n <= 0) this.migratingShards.delete(s);
        else this.migratingShards.set(s, n);
      }
    }
  }
}
