import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import { type DonorPhase, type ReportedDonorPhase, TesseraError, donorPhaseMachine } from '@tessera/core';
import type { DonorMoveRangeRequest, MigrationDecision, MigrationPhase, MoveRangeResult, RecvChunkStatus } from '@tessera/protocol';
import { Failpoints, LOGGER, SETTINGS } from '@tessera/platform';
import type { ShardSettings } from '../shard.settings.js';
import { ShardingRuntime } from '../sharding/sharding-runtime.service.js';
import { type DonorPlan, DonorPreconditions } from './donor-preconditions.js';
import { MigrationCloner } from './migration-cloner.js';
import { type CriticalSectionHandle, MigrationCoordinator } from './migration-coordinator.js';
import type { CoordinatorDocument } from './migration-coordinator.store.js';
import { MigrationReporter } from './migration-reporter.js';

/** How often cloning progress goes to the changelog. */
const PROGRESS_REPORT_MS = 1_000;

/** One donation in flight: its phase, what the earlier phases learned, and what the later ones hold. */
export interface DonorMigration {
  request: DonorMoveRangeRequest;
  phase: DonorPhase;
  /** Each reported phase with the time it began. */
  phases: Array<{ phase: MigrationPhase; at: string }>;
  plan: DonorPlan;
  document: CoordinatorDocument;
  status: RecvChunkStatus | undefined;
  section: CriticalSectionHandle | undefined;
  sectionStart: number;
  /** Set once the config commit was sent: from then on only the config server's decision ends the migration. */
  commitSent: boolean;
}

/**
 * The donor side of a migration (MongoDB's MigrationSourceManager): one method per phase, each
 * moving `DonorMigration.phase` along `donorPhaseMachine` and reporting it (`moveChunk.phase`).
 * Writes to the range are captured and served by the cloner; the coordinator document, the
 * decision and the end on both sides belong to the coordinator.
 */
@Injectable()
export class MigrationSourceManager {
  /**
   * Per namespace, when the last critical section queued ends. The donations of one collection
   * run side by side until their critical sections, which take turns: each commit changes the
   * collection's version, and a section blocks the whole collection.
   */
  private readonly sectionTurns = new Map<string, Promise<void>>();

  constructor(
    private readonly preconditions: DonorPreconditions,
    private readonly coordinator: MigrationCoordinator,
    private readonly cloner: MigrationCloner,
    private readonly runtime: ShardingRuntime,
    private readonly reporter: MigrationReporter,
    private readonly failpoints: Failpoints,
    @Inject(SETTINGS) private readonly settings: ShardSettings,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  /** Runs the migration to its end; `ready` is recovery, which must be over before a new donation starts. */
  async run(request: DonorMoveRangeRequest, ready: Promise<void> | undefined): Promise<MoveRangeResult> {
    const m = await this.checkPreconditions(request, ready);
    let decision: MigrationDecision;
    try {
      await this.startClone(m);
      await this.awaitSteadyState(m);
      await this.enterCriticalSection(m);
      await this.commitOnRecipient(m);
      decision = await this.commitOnConfig(m);
    } catch (error) {
      this.logger.warn(
        { err: error, migrationId: request.migrationId },
        `migration ${request.migrationId} of ${request.ns} failed: ${(error as Error).message}`,
      );
      // A commit sent and not known to have failed may have landed: the coordinator document
      // stays undecided (and the critical section held) for recovery to ask the config server.
      if (m.commitSent) throw error;
      return this.abort(m, error);
    }
    if (decision === 'aborted') {
      const error = new TesseraError(
        'CONFLICTING_OPERATION',
        `the config server did not commit migration ${request.migrationId} of ${request.ns}`,
        {
          details: { migrationId: request.migrationId },
        },
      );
      return this.abort(m, error);
    }
    return this.release(m);
  }

  /**
   * checkingPreconditions → registered. Checks the range against fresh metadata (see
   * DonorPreconditions), then registers the donation and records the coordinator document and
   * this side's pending range deletion together. Fails without leaving anything behind.
   */
  private async checkPreconditions(request: DonorMoveRangeRequest, ready: Promise<void> | undefined): Promise<DonorMigration> {
    const plan = await this.preconditions.check(request, ready);
    const document = await this.coordinator.start(request, plan);
    const m: DonorMigration = {
      request,
      phase: donorPhaseMachine.initial,
      phases: [],
      plan,
      document,
      status: undefined,
      section: undefined,
      sectionStart: 0,
      commitSent: false,
    };
    this.report(m, 'moveChunk.start', { documents: plan.size.documents, bytes: plan.size.bytes });
    this.enter(m, 'registered');
    return m;
  }

  /** registered → cloning: writes to the range are captured, and the recipient has started cloning. */
  private async startClone(m: DonorMigration): Promise<void> {
    await this.cloner.startClone(m.request, m.plan);
    this.enter(m, 'cloning');
    await this.failpoints.pauseAt('migration.donor.cloning', m.request.ns);
  }

  /** cloning → steady: the recipient has cloned the range and caught up with the captured writes (MongoDB's awaitToCatchUp). */
  private async awaitSteadyState(m: DonorMigration): Promise<void> {
    let lastReport = performance.now();
    m.status = await this.cloner.awaitSteadyState(m.request, (status) => {
      if (performance.now() - lastReport < PROGRESS_REPORT_MS) return;
      lastReport = performance.now();
      this.report(m, 'moveChunk.progress', {
        state: status.state,
        documentsCloned: status.documentsCloned,
        bytesCloned: status.bytesCloned,
      });
    });
    this.enter(m, 'steady', { documentsCloned: m.status.documentsCloned, bytesCloned: m.status.bytesCloned });
    await this.failpoints.pauseAt('migration.donor.steady', m.request.ns);
  }

  /**
   * steady → criticalSection: after the collection's earlier donations have left theirs, new
   * writes to the collection wait (those under way finish first). The recipient goes on catching
   * up meanwhile.
   */
  private async enterCriticalSection(m: DonorMigration): Promise<void> {
    const { ns, migrationId } = m.request;
    const queued = performance.now();
    const behindAnother = this.sectionTurns.has(ns);
    const turn = this.sectionTurn(ns);
    await turn.ready;
    const waitedForTurnMs = Math.round(performance.now() - queued);
    let section: CriticalSectionHandle;
    try {
      section = await this.runtime.enterCriticalSection(ns, `migration ${migrationId}`);
    } catch (error) {
      turn.done();
      throw error;
    }
    m.section = {
      blockReads: () => section.blockReads(),
      release: () => {
        section.release();
        turn.done();
      },
    };
    m.sectionStart = performance.now();
    this.enter(m, 'criticalSection', behindAnother ? { waitedForTurnMs } : {});
    await this.failpoints.pauseAt('migration.donor.criticalSection', m.request.ns);
  }

  /**
   * criticalSection → recipientCommitted: the recipient drained the last captured writes and
   * holds its own critical section; reads stop here too. Fails with `EXCEEDED_TIME_LIMIT` when
   * the recipient takes longer than the critical section's timeout.
   */
  private async commitOnRecipient(m: DonorMigration): Promise<void> {
    const deadline = Date.now() + this.settings.TESSERA_MIGRATION_CRITICAL_SECTION_TIMEOUT_MS;
    m.status = await withDeadline(this.cloner.commitClone(m.request), deadline, 'the recipient commit');
    this.enter(m, 'recipientCommitted', { documentsCloned: m.status.documentsCloned, bytesCloned: m.status.bytesCloned });
    m.section?.blockReads();
    m.commitSent = true;
  }

  /**
   * In recipientCommitted: commits on the config server and answers its decision. Stays in
   * recipientCommitted when the outcome cannot be learned: recovery asks for it after a restart.
   */
  private commitOnConfig(m: DonorMigration): Promise<MigrationDecision> {
    return this.coordinator.commitOnConfig(m.request, m.plan);
  }

  /**
   * recipientCommitted → committed → released → rangeDeletionScheduled: records the decision,
   * leaves the critical section, releases the recipient and schedules this side's range deletion.
   */
  private async release(m: DonorMigration): Promise<MoveRangeResult> {
    const { request, plan } = m;
    this.enter(m, 'committed');
    await this.failpoints.pauseAt('migration.donor.committed', request.ns);
    const criticalSectionMs = await this.coordinator.finish(m.document, 'committed', m.section, m.sectionStart);
    this.enter(m, 'released', { criticalSectionMs });
    this.enter(m, 'rangeDeletionScheduled', { orphanCleanupDelaySecs: this.settings.TESSERA_ORPHAN_CLEANUP_DELAY_SECS });
    const result: MoveRangeResult = {
      migrationId: request.migrationId,
      ns: request.ns,
      donor: plan.shard,
      recipient: request.recipient,
      range: request.range,
      documentsCloned: m.status?.documentsCloned ?? 0,
      bytesCloned: m.status?.bytesCloned ?? 0,
      criticalSectionMs,
      phases: m.phases,
    };
    this.report(m, 'moveChunk.from', {
      phases: m.phases,
      documentsCloned: result.documentsCloned,
      bytesCloned: result.bytesCloned,
      criticalSectionMs,
      // Paced from the start, or since: the throttle may pace a running clone (recvChunkPacing).
      ...(request.clonePacing === undefined ? {} : { clonePacing: request.clonePacing }),
      ...(request.clonePacing === undefined && !m.status?.clonePausedMs ? {} : { clonePausedMs: m.status?.clonePausedMs ?? 0 }),
    });
    return result;
  }

  /**
   * Any phase before committed → aborted: this side's range deletion goes and the recipient's
   * becomes ready (see MigrationCoordinator.finish); the failure is reported. Rethrows `error`.
   */
  private async abort(m: DonorMigration, error: unknown): Promise<never> {
    m.phase = donorPhaseMachine.move(m.phase, 'aborted');
    await this.coordinator.finish(m.document, 'aborted', m.section, m.sectionStart);
    this.report(m, 'moveChunk.error', { error: (error as Error).message, phases: m.phases });
    throw error;
  }

  /** Queues for `ns`'s critical section: `ready` when the earlier turns are done; `done` ends this one (again is a no-op). */
  private sectionTurn(ns: string): { ready: Promise<void>; done: () => void } {
    const ready = this.sectionTurns.get(ns) ?? Promise.resolve();
    let done!: () => void;
    const ended = new Promise<void>((resolve) => (done = resolve));
    const tail = ready.then(() => ended);
    this.sectionTurns.set(ns, tail);
    void tail.then(() => {
      if (this.sectionTurns.get(ns) === tail) this.sectionTurns.delete(ns);
    });
    return { ready, done };
  }

  /** Moves to `phase` and reports it with the time it began. */
  private enter(m: DonorMigration, phase: ReportedDonorPhase, details: Record<string, unknown> = {}): void {
    m.phase = donorPhaseMachine.move(m.phase, phase);
    const at = new Date().toISOString();
    m.phases.push({ phase, at });
    this.report(m, 'moveChunk.phase', { phase, at, ...details });
  }

  private report(m: DonorMigration, what: string, details: Record<string, unknown> = {}): void {
    const { request } = m;
    this.reporter.report({
      what,
      ns: request.ns,
      details: {
        migrationId: request.migrationId,
        from: m.plan.shard,
        to: request.recipient,
        min: request.range.min,
        max: request.range.max,
        ...details,
      },
    });
  }
}

async function withDeadline<T>(work: Promise<T>, deadline: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new TesseraError('EXCEEDED_TIME_LIMIT', `the critical section timed out waiting for ${what}`)),
      Math.max(0, deadline - Date.now()),
    );
  });
  try {
    return await Promise.race([work, expired]);
  } finally {
    clearTimeout(timer);
  }
}
