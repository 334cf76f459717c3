import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { type CollectionBalanceStatus, explainIdleRound } from '@tessera/core';
import type { BalancerRoundMigration, BalancerStatus, BalancerThrottleStatus } from '@tessera/protocol';
import { ChangelogService } from '../changelog/changelog.service.js';
import type { RoundError, RoundSplit } from './balancer-round.js';

type LastRound = NonNullable<BalancerStatus['lastRound']>;

/** What a round did, for its `balancer.round` changelog row. */
export interface RoundRecord {
  /** When the round started (ISO 8601): under the `continuous` scheduler rounds overlap. */
  readonly startedAt: string;
  readonly timings: Pick<LastRound, 'durationMs' | 'selectionTimeMillis' | 'throttleTimeMillis' | 'migrationTimeMillis'>;
  readonly statuses: readonly CollectionBalanceStatus[];
  readonly migrations: BalancerRoundMigration[];
  readonly splits: RoundSplit[];
  readonly errors: RoundError[];
  readonly collections: number;
  /** Woken before its migrations, which it did not issue. */
  readonly interrupted: boolean;
  /** Migrations planned but held back by the continuous scheduler's load throttle, and why. */
  readonly held?: { readonly count: number; readonly why: string };
  /** The continuous scheduler's load throttle as the round met it. */
  readonly throttle?: Pick<
    BalancerThrottleStatus,
    'state' | 'reason' | 'pauseMs' | 'cloneShare' | 'idleWriteP99Ms' | 'migratingWriteP99Ms'
  >;
}

/**
 * The balancer's changelog rows: one `balancer.round` per round (a round that did nothing says
 * why, and only when that story changed since the last one, so an idle balancer does not flood
 * the changelog), and one `balancer.topChunk` per top-chunk move.
 */
@Injectable()
export class BalancerRecorder {
  /** The story of the last no-op round recorded. */
  private lastIdleReason: string | undefined;

  constructor(
    private readonly dataSource: DataSource,
    private readonly changelog: ChangelogService,
  ) {}

  /** Forgets the last idle story (a new term records its first idle round). */
  reset(): void {
    this.lastIdleReason = undefined;
  }

  async recordRound(round: RoundRecord): Promise<void> {
    const { statuses, migrations, splits, errors, collections } = round;
    const details: Record<string, unknown> = { startedAt: round.startedAt, collections, migrations, errors, ...round.timings };
    if (splits.length > 0) details.splits = splits;
    if (round.held !== undefined) details.held = round.held;
    if (round.throttle !== undefined && (migrations.length > 0 || round.held !== undefined)) details.throttle = round.throttle;
    if (migrations.length === 0 && splits.length === 0) {
      const why = round.held !== undefined ? `throttled: ${round.held.why}` : explainIdleRound(statuses, collections, round.interrupted);
      details.why = why;
      details.collectionStatus = statuses.map((s) => ({
        ns: s.namespace,
        compliant: s.balancerCompliant,
        violation: s.firstComplianceViolation,
        jumboChunksSkipped: s.jumboChunksSkipped,
      }));
      const key = JSON.stringify([why, errors.map((e) => e.code), details.collectionStatus]);
      if (key === this.lastIdleReason) return;
      this.lastIdleReason = key;
    } else {
      this.lastIdleReason = undefined;
    }
    await this.changelog.record(this.dataSource.manager, { what: 'balancer.round', details });
  }

  async recordTopChunkMove(ns: string, shard: string, details: Record<string, unknown>): Promise<void> {
    await this.changelog.record(this.dataSource.manager, { what: 'balancer.topChunk', ns, shard, details });
  }
}
