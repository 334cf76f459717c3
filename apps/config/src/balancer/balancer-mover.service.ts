import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import type { MigrationPlan, ShardId, ShardKeyPattern } from '@tessera/core';
import type { ClonePacing, ClusterSettings } from '@tessera/protocol';
import { InternalClients, LOGGER } from '@tessera/platform';
import { MigrationManagerService } from '../migration/migration-manager.service.js';
import { wireKey } from './balancer-round.js';
import { BalancerThrottleService } from './balancer-throttle.service.js';
import { ClusterStatisticsService } from './cluster-statistics.service.js';

/**
 * Issues the balancer's migrations (a round's and the top-chunk moves) through moveRange, with
 * their reason, and knows which are under way: the policies plan around their donors and
 * recipients (`MigrationSlots`). Each one's start and end go to
 * the throttle (`BalancerThrottleService`), and the bytes each moved to the snapshot's view of
 * the shards' bytes (`ClusterStatisticsService.noteMigration`). When the throttle's pacing
 * changes, the recipients of those under way are told (`repace`).
 */
@Injectable()
export class BalancerMover {
  /** The migrations this balancer issued that have not ended. */
  readonly underWay = new Set<MigrationPlan>();
  /** The id and recipient of each migration under way, once registered. */
  private readonly registered = new Map<MigrationPlan, { migrationId: string; recipientUrl: string }>();

  constructor(
    private readonly migrations: MigrationManagerService,
    private readonly throttle: BalancerThrottleService,
    private readonly statistics: ClusterStatisticsService,
    private readonly clients: InternalClients,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  /**
   * Hands the throttle's new pacing (undefined: full speed) to the recipient of every migration
   * under way, for the rest of its clone. One that does not answer keeps its pacing.
   */
  async repace(pacing: ClonePacing | undefined): Promise<void> {
    await Promise.all(
      [...this.registered.values()].map(({ migrationId, recipientUrl }) =>
        this.clients
          .migration(recipientUrl)
          .recvChunkPacing({ migrationId, clonePacing: pacing ?? null })
          .catch((error: unknown) =>
            this.logger.debug({ err: error, migrationId }, `repacing migration ${migrationId} failed: ${(error as Error).message}`),
          ),
      ),
    );
  }

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
        { reason: plan.reason, clonePacing: this.throttle.clonePacing(), onRegistered: (m) => this.registered.set(plan, m) },
      );
      cloned = result.bytesCloned;
      this.statistics.noteMigration(plan.namespace, plan.from, plan.to, cloned);
    } finally {
      this.throttle.ended(cloned);
      this.underWay.delete(plan);
      this.registered.delete(plan);
    }
  }
}
