import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import { type MigrationPlan, type ShardKeyPattern, selectMigrations, selectTopChunkMigration } from '@tessera/core';
import {
  type BalancerCollectionStatus,
  type ClusterSettings,
  type MoveTopChunkRequest,
  type MoveTopChunkResult,
  chunkRangeFromWire,
  moveTopChunkRequestSchema,
} from '@tessera/protocol';
import { LOGGER, parseWith } from '@tessera/platform';
import { keyPatternOfRow } from '../catalog/catalog-rows.js';
import { LeaderService } from '../leader/leader.service.js';
import { ClusterSettingsService } from '../settings/cluster-settings.service.js';
import { isInsideActiveWindow } from './active-window.js';
import { BalancerCatalogStore } from './balancer-catalog.store.js';
import { BalancerMover } from './balancer-mover.service.js';
import { BalancerRecorder } from './balancer-recorder.service.js';
import { chunkSelectionSettings, describe, errorEntry, statisticsOf } from './balancer-round.js';
import { BalancerThrottleService } from './balancer-throttle.service.js';
import { ClusterStatisticsService } from './cluster-statistics.service.js';

/**
 * The balancer's answers about one collection outside its rounds: `balancerCollectionStatus`
 * (the policy's verdict on a fresh snapshot) and a shard's request to move the top chunk it just
 * split off (MongoDB's ChunkSplitter asking for `balanceSingleChunk`).
 */
@Injectable()
export class BalancerCollectionService {
  constructor(
    private readonly leader: LeaderService,
    private readonly clusterSettings: ClusterSettingsService,
    private readonly catalog: BalancerCatalogStore,
    private readonly statistics: ClusterStatisticsService,
    private readonly mover: BalancerMover,
    private readonly recorder: BalancerRecorder,
    private readonly throttle: BalancerThrottleService,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  /** `balancerCollectionStatus(ns)`: the policy's verdict on the collection as it is now. */
  async collectionStatus(ns: string): Promise<BalancerCollectionStatus> {
    const settings = await this.clusterSettings.get();
    const row = await this.catalog.collection(ns);
    if (row.defragment_collection) return { balancerCompliant: false, firstComplianceViolation: 'defragmentingChunks' };
    const shards = await this.catalog.shards();
    const distribution = await this.statistics.distribution(row, settings, shards);
    const result = selectMigrations(shards.map(statisticsOf), [distribution], chunkSelectionSettings(settings));
    const status = result.collections[0]!;
    return {
      balancerCompliant: status.balancerCompliant,
      ...(status.firstComplianceViolation !== undefined ? { firstComplianceViolation: status.firstComplianceViolation } : {}),
    };
  }

  /**
   * A shard split off the top (or bottom) chunk of `ns` and asks that it move away (the top-chunk
   * optimization). Scheduled when this process is the leader, the balancer is on and inside its
   * window, the collection is balanced and not being defragmented, and the policy finds a less
   * loaded shard; the migration (reason `topChunk`) runs in the background and its outcome is a
   * `balancer.topChunk` changelog row. Under the `continuous` scheduler the load throttle's gate
   * applies to it as to a round's migrations (`throttled` while it would hold one).
   */
  async moveTopChunk(input: MoveTopChunkRequest): Promise<MoveTopChunkResult> {
    const request = parseWith(moveTopChunkRequestSchema, input, 'moveTopChunk request');
    if (!this.leader.isLeader) return { outcome: 'skipped', why: 'notLeader' };
    const settings = await this.clusterSettings.get();
    if (settings.balancer.mode !== 'full') return { outcome: 'skipped', why: 'balancerOff' };
    if (!isInsideActiveWindow(settings.balancer.activeWindow, new Date())) return { outcome: 'skipped', why: 'outsideActiveWindow' };
    const row = await this.catalog.collection(request.ns);
    if (!row.balancing_enabled) return { outcome: 'skipped', why: 'balancingDisabled' };
    if (row.defragment_collection) return { outcome: 'skipped', why: 'defragmenting' };
    if (settings.balancer.scheduler === 'continuous' && this.throttle.gate().waitMs > 0) return { outcome: 'skipped', why: 'throttled' };
    const shards = await this.catalog.shards();
    const distribution = await this.statistics.distribution(row, settings, shards);
    const range = chunkRangeFromWire(request.range);
    const decision = selectTopChunkMigration(
      shards.map(statisticsOf),
      distribution,
      range,
      chunkSelectionSettings(settings),
      this.mover.busyShards(),
    );
    if ('skip' in decision) return { outcome: 'skipped', why: decision.skip };
    const plan = decision.move;
    if (plan.from !== request.shard) return { outcome: 'skipped', why: 'notOnShard' };
    void this.issueTopChunkMove(plan, keyPatternOfRow(row), settings);
    return { outcome: 'scheduled', to: plan.to };
  }

  private async issueTopChunkMove(plan: MigrationPlan, pattern: ShardKeyPattern, settings: ClusterSettings): Promise<void> {
    const described = describe(plan, pattern);
    let details: Record<string, unknown>;
    try {
      await this.mover.move(plan, pattern, settings);
      details = { ...described, outcome: 'moved' };
    } catch (error) {
      details = { ...described, outcome: 'failed', error: errorEntry(plan.namespace, error) };
      this.logger.info({ err: error, ns: plan.namespace }, `top chunk move of ${plan.namespace} failed: ${(error as Error).message}`);
    }
    await this.recorder
      .recordTopChunkMove(plan.namespace, plan.from, details)
      .catch((error: unknown) => this.logger.warn({ err: error }, `cannot record a top chunk move: ${(error as Error).message}`));
  }
}
