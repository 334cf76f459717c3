import { setTimeout as sleep } from 'node:timers/promises';
import { Inject, Injectable, type OnApplicationShutdown } from '@nestjs/common';
import type { Logger } from 'pino';
import { IGNORED_VERSION } from '@tessera/core';
import type { DonorMoveRangeRequest, MigrationDecision } from '@tessera/protocol';
import { LOGGER } from '@tessera/platform';
import { tableName } from '../collections/collection-storage.service.js';
import { ShardingRuntime } from '../sharding/sharding-runtime.service.js';
import type { DonorPlan } from './donor-preconditions.js';
import { MigrationCloner } from './migration-cloner.js';
import { type CoordinatorDocument, MigrationCoordinatorStore } from './migration-coordinator.store.js';
import { MigrationMetrics } from './migration-metrics.js';
import { MigrationPeers } from './migration-peers.js';
import { RangeDeleterService } from './range-deleter.service.js';

/** A critical section the donor holds: writes blocked, then reads too. */
export interface CriticalSectionHandle {
  blockReads(): void;
  release(): void;
}

/**
 * The donor's coordinator (MongoDB's MigrationCoordinator): owns the coordinator document from
 * the donation's registration to its end, learns the decision from the config server, and ends
 * the migration by it on both sides. Every step is idempotent, so recovery can run the end again
 * after a crash at any point.
 */
@Injectable()
export class MigrationCoordinator implements OnApplicationShutdown {
  private stopped = false;

  constructor(
    private readonly store: MigrationCoordinatorStore,
    private readonly cloner: MigrationCloner,
    private readonly runtime: ShardingRuntime,
    private readonly rangeDeleter: RangeDeleterService,
    private readonly metrics: MigrationMetrics,
    private readonly peers: MigrationPeers,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  onApplicationShutdown(): void {
    this.stopped = true;
  }

  /** Registers the donation and writes its coordinator document and this side's pending range deletion, together. */
  async start(request: DonorMoveRangeRequest, plan: DonorPlan): Promise<CoordinatorDocument> {
    const document = await this.store.create({
      registration: {
        migrationId: request.migrationId,
        role: 'donor',
        ns: request.ns,
        minEjson: JSON.stringify(request.range.min),
        maxEjson: JSON.stringify(request.range.max),
        otherShard: request.recipient,
      },
      collectionUuid: plan.collectionUuid,
      min: plan.min,
      max: plan.max,
      recipientUrl: request.recipientUrl,
      preMigrationVersion: plan.shardVersion,
    });
    this.metrics.started.inc();
    return document;
  }

  /**
   * Commits on the config server. A refusal is an abort; when the outcome is unknown (the
   * config server did not answer), the decision is asked for until it can be had: the config
   * server records an abort if the commit did not land, so a late commit cannot follow.
   */
  async commitOnConfig(request: DonorMoveRangeRequest, plan: DonorPlan): Promise<MigrationDecision> {
    const config = await this.peers.config();
    try {
      await config.commitMigration({
        ns: request.ns,
        expectedCollectionVersion: { epoch: plan.collectionVersion.epoch, timestamp: plan.collectionVersion.timestamp },
        range: request.range,
        donor: plan.shard,
        recipient: request.recipient,
        migrationId: request.migrationId,
      });
      return 'committed';
    } catch (error) {
      this.logger.warn(
        { err: error },
        `the commit of migration ${request.migrationId} failed or went unanswered; asking the config server for the decision`,
      );
      return this.decisionFromConfig(request.migrationId);
    }
  }

  /** The config server's decision (it records `aborted` if it has none), asked until it answers. */
  async decisionFromConfig(migrationId: string): Promise<MigrationDecision> {
    const { decision } = await this.untilDone(`learn the decision of migration ${migrationId}`, async () =>
      (await this.peers.config()).decideMigration(migrationId),
    );
    return decision;
  }

  /**
   * Tells the config server that this side finished migration `migrationId`, once: should the
   * message be lost, the config server's reconciler finds that no shard runs it.
   */
  async endOnConfig(migrationId: string): Promise<void> {
    try {
      await (await this.peers.config()).migrationEnded(migrationId);
    } catch (error) {
      this.logger.info(
        { err: error, migrationId },
        `could not tell the config server that migration ${migrationId} ended: ${(error as Error).message}`,
      );
    }
  }

  /**
   * Ends a migration by its decision, on both sides, in the reference's order: records the
   * decision; refreshes this shard's metadata and leaves the critical section; then, committed,
   * the recipient forgets its range deletion and this side's becomes ready, or, aborted, this
   * side's is dropped and the recipient's becomes ready; last, the coordinator document and the
   * registration go. Answers how long the critical section was held, in ms.
   */
  async finish(
    document: CoordinatorDocument,
    decision: MigrationDecision,
    section: CriticalSectionHandle | undefined,
    sectionStart: number,
  ): Promise<number> {
    const criticalSectionMs = await this.leaveCriticalSection(document, decision, section, sectionStart);
    // Outside the critical section: the range is no longer written here (it moved, or the recipient's copy is dropped).
    await this.cloner.dropCapture(document.id, tableName(document.collectionUuid));
    if (decision === 'committed') await this.completeCommitted(document);
    else await this.completeAborted(document);
    return Math.round(criticalSectionMs * 10) / 10;
  }

  /** Records the decision, stops serving the donation, reloads the metadata after a commit, and releases the section. */
  private async leaveCriticalSection(
    document: CoordinatorDocument,
    decision: MigrationDecision,
    section: CriticalSectionHandle | undefined,
    sectionStart: number,
  ): Promise<number> {
    await this.store.recordDecision(document.id, decision);
    this.cloner.endDonation(document.id);
    if (decision === 'committed') {
      const state = await this.runtime.state();
      state.invalidate(document.ns);
      await state.checkShardVersion(document.ns, IGNORED_VERSION).catch(() => undefined);
    }
    section?.release();
    const criticalSectionMs = section === undefined ? 0 : performance.now() - sectionStart;
    if (section !== undefined) this.metrics.criticalSection.observe(criticalSectionMs / 1000);
    return criticalSectionMs;
  }

  private async completeCommitted(document: CoordinatorDocument): Promise<void> {
    await this.releaseRecipient(document, 'committed');
    await this.store.completeCommitted(document.id, this.rangeDeleter.donorDelaySecs);
    this.rangeDeleter.poke();
    this.metrics.committed.inc();
  }

  private async completeAborted(document: CoordinatorDocument): Promise<void> {
    await this.store.forgetRangeDeletion(document.id);
    await this.releaseRecipient(document, 'aborted');
    await this.store.completeAborted(document.id);
    this.metrics.aborted.inc();
  }

  private releaseRecipient(document: CoordinatorDocument, decision: MigrationDecision): Promise<{ released: boolean }> {
    const recipient = this.peers.shard(document.recipientUrl);
    return this.untilDone(`release migration ${document.id} on ${document.recipient}`, () =>
      recipient.recvChunkRelease({ migrationId: document.id, decision }),
    );
  }

  private async untilDone<T>(what: string, work: () => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await work();
      } catch (error) {
        if (this.stopped) throw error;
        this.logger.warn({ err: error }, `${what}: ${(error as Error).message}; retrying`);
        await sleep(Math.min(2_000, 100 * 2 ** attempt));
      }
    }
  }
}
