import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import {
  type BalancerRoundPlan,
  type DefragmentationAction,
  type DefragmentationOutcome,
  type DefragmentationState,
  type MigrationGate,
  type MigrationPlan,
  type RoundMigrationOutcome,
  NOT_ISSUED_OUTCOME,
  TesseraError,
  defragmentationActionOf,
  followUpMigration,
  onDefragmentationOutcome,
} from '@tessera/core';
import type { BalancerRoundMigration, BalancerStatus, BalancerThrottleStatus, ClusterSettings } from '@tessera/protocol';
import { LOGGER, SETTINGS } from '@tessera/platform';
import type { ConfigSettings } from '../config.settings.js';
import { BalancerMover } from './balancer-mover.service.js';
import { BalancerRecorder, type RoundRecord } from './balancer-recorder.service.js';
import {
  type RoundError,
  type RoundSplit,
  type Snapshot,
  type SnapshotCollection,
  describe,
  errorEntry,
  planRound,
  planRoundSplits,
} from './balancer-round.js';
import { BalancerSecondaryService } from './balancer-secondary.service.js';
import { BalancerSplitter } from './balancer-splitter.service.js';
import { BalancerThrottleService } from './balancer-throttle.service.js';
import { ClusterStatisticsService } from './cluster-statistics.service.js';
import { DefragmentationStore } from './defragmentation.store.js';

type LastRound = NonNullable<BalancerStatus['lastRound']>;

/** Migrations the load throttle held back in a round, and why. */
type Held = NonNullable<RoundRecord['held']>;

/** The `rounds` scheduler has no load throttle: every planned migration starts. */
const OPEN_GATE: MigrationGate = { waitMs: 0, why: null };

/** What the main loop lends a round: whether its term still holds, whether it was woken, and the throttle's sleep. */
export interface RoundControl {
  /** False once the loop stopped or stepped down since the round started. */
  isCurrent(): boolean;
  /** A wake-up came during the round (see `BalancerService.wake`). */
  isWoken(): boolean;
  /** Sleeps `ms`, or less when woken or stopped. */
  sleep(ms: number): Promise<void>;
  /** One of the round's migrations ended (called under the `continuous` scheduler only). */
  onMigrationEnd(): void;
  /** Start a round in `ms`: the load throttle held a migration that may start then. */
  wakeIn(ms: number): void;
}

/** The migrations a round issues and what it learns from them. */
interface Issuing {
  readonly shards: Snapshot['shards'];
  readonly settings: ClusterSettings;
  readonly skipped: Set<string>;
  readonly tooBig: RoundSplit[];
  readonly errors: RoundError[];
}

/**
 * One round of the balancer's main loop, executing the pure round of libs/core: load the
 * snapshot; issue `planZoneBoundarySplits` and read the split chunks again; `planBalancerRound`
 * with the defragmentation states and what the previous rounds left; sleep the plan's throttle;
 * issue its migrations in parallel through `BalancerMover`, each outcome handed to
 * `followUpMigration`; record. Under the `continuous` scheduler there is no throttle's sleep and
 * the round does not wait for its migrations (see `run`). See README.md beside this file.
 */
@Injectable()
export class BalancerRoundService {
  private lastRoundSummary: LastRound | null = null;
  /** Legacy chunk-count mode: collections the previous round found unbalanced. */
  private chunkCountInProgress: ReadonlySet<string> = new Set();
  /** When the last round's migrations ended (MongoDB's lastMigrationTime); null: none this term. */
  private lastMigrationAt: number | null = null;

  constructor(
    private readonly statistics: ClusterStatisticsService,
    private readonly defragmentation: DefragmentationStore,
    private readonly secondary: BalancerSecondaryService,
    private readonly splitter: BalancerSplitter,
    private readonly mover: BalancerMover,
    private readonly recorder: BalancerRecorder,
    private readonly throttle: BalancerThrottleService,
    @Inject(SETTINGS) private readonly settings: ConfigSettings,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  /** This process's last round, for `balancerStatus`. */
  get lastRound(): LastRound | null {
    return this.lastRoundSummary;
  }

  /** A new term: no migration yet, defragmentation states and the idle story read afresh. */
  reset(): void {
    this.lastMigrationAt = null;
    this.defragmentation.reset();
    this.recorder.reset();
  }

  /**
   * One round; answers whether it issued migrations. Under the `rounds` scheduler it returns once
   * they all ended and the round is recorded. Under `continuous` it returns once they are issued:
   * each one's end calls `control.onMigrationEnd` (the loop plans again at once, with the shards
   * still migrating busy), and the round is recorded when its last one ends.
   */
  async run(settings: ClusterSettings, control: RoundControl): Promise<boolean> {
    const started = Date.now();
    const continuous = settings.balancer.scheduler === 'continuous';
    const { snapshot, splits } = await this.snapshotAfterZoneSplits(settings);
    const plan = await this.plan(snapshot, settings, continuous ? 0 : this.settings.TESSERA_BALANCER_MIGRATIONS_THROTTLING_MS);
    const selected = Date.now();
    // A wake-up before or during the throttle's sleep ends the round here: the next one starts at
    // once and selects with the change seen.
    const sleeps = plan.throttleMs > 0 && !control.isWoken();
    if (sleeps) await control.sleep(plan.throttleMs);
    // Stopped (or stepped down) meanwhile: issue nothing; a new term starts from a fresh state.
    if (plan.migrations.length > 0 && !control.isCurrent()) return false;
    const throttled = sleeps ? Date.now() : selected;
    const interrupted = plan.throttleMs > 0 && control.isWoken();
    if (interrupted) await this.returnNotIssued(plan.migrations);
    const errors: RoundError[] = [...snapshot.errors, ...failedSplitErrors(splits)];
    const issuing: Issuing = { shards: snapshot.shards, settings, skipped: new Set(), tooBig: [], errors };
    // The load throttle's decision as the round met it, for the round's row (continuous only).
    const throttle = continuous ? throttleDecisionOf(this.throttle.status()) : undefined;
    const { issued, running, held } = await this.issueThroughGate(
      interrupted ? [] : plan.migrations,
      snapshot,
      issuing,
      continuous,
      control,
    );
    const recorded = Promise.all(running).then((outcomes) => {
      const ended = Date.now();
      if (issued > 0) this.lastMigrationAt = ended;
      const timings = {
        durationMs: ended - started,
        selectionTimeMillis: selected - started,
        throttleTimeMillis: throttled - selected,
        migrationTimeMillis: issued > 0 ? ended - throttled : 0,
      };
      return this.record(new Date(started).toISOString(), timings, {
        plan,
        snapshot,
        splits,
        issuing,
        outcomes,
        interrupted,
        held,
        throttle,
      });
    });
    if (!continuous) await recorded;
    else
      recorded.catch((error: unknown) => this.logger.warn({ err: error }, `balancer round's record failed: ${(error as Error).message}`));
    return issued > 0;
  }

  /**
   * Issues the planned migrations, each once the load throttle's gate is open (continuous
   * scheduler; `rounds` has none). A migration the gate holds is not issued: defragmentation's
   * go back to be issued again, and the loop is woken when the gate opens (unless it waits for a
   * migration's end, which wakes it anyway). Answers how many were issued, their outcomes to
   * come, and what was held and why.
   */
  private async issueThroughGate(
    migrations: readonly MigrationPlan[],
    snapshot: Snapshot,
    issuing: Issuing,
    continuous: boolean,
    control: RoundControl,
  ): Promise<{ issued: number; running: Array<Promise<BalancerRoundMigration>>; held: Held | undefined }> {
    const byNs = new Map(snapshot.collections.map((c) => [c.distribution.namespace, c]));
    const running: Array<Promise<BalancerRoundMigration>> = [];
    const notIssued: MigrationPlan[] = [];
    let why: string | undefined;
    let wakeInMs = Number.POSITIVE_INFINITY;
    for (const m of migrations) {
      // Each issue counts its migration in flight before it yields, so the next gate sees it.
      const gate = continuous ? this.throttle.gate() : OPEN_GATE;
      if (gate.waitMs > 0) {
        notIssued.push(m);
        why ??= gate.why ?? 'throttled';
        wakeInMs = Math.min(wakeInMs, gate.waitMs);
        continue;
      }
      running.push(this.issue(m, byNs.get(m.namespace)!, issuing).finally(() => continuous && control.onMigrationEnd()));
    }
    if (notIssued.length === 0) return { issued: running.length, running, held: undefined };
    await this.returnNotIssued(notIssued);
    if (Number.isFinite(wakeInMs)) control.wakeIn(wakeInMs);
    return { issued: running.length, running, held: { count: notIssued.length, why: why! } };
  }

  /** Keeps the round as `balancerStatus`'s last round and records its changelog row. */
  private async record(
    startedAt: string,
    timings: RoundRecord['timings'],
    round: {
      plan: BalancerRoundPlan;
      snapshot: Snapshot;
      splits: RoundSplit[];
      issuing: Issuing;
      outcomes: BalancerRoundMigration[];
      interrupted: boolean;
      held: Held | undefined;
      throttle: RoundRecord['throttle'];
    },
  ): Promise<void> {
    const { plan, snapshot, splits, issuing, outcomes, interrupted, held, throttle } = round;
    this.lastRoundSummary = { startedAt, ...timings, migrations: outcomes, errors: issuing.errors };
    await this.recorder.recordRound({
      startedAt,
      timings,
      statuses: plan.statuses,
      migrations: outcomes,
      splits: [...splits, ...issuing.tooBig],
      errors: issuing.errors,
      collections: snapshot.collections.length,
      interrupted,
      ...(held === undefined ? {} : { held }),
      ...(throttle === undefined ? {} : { throttle }),
    });
  }

  /** The snapshot, and the zone-boundary splits issued on it; the split collections' chunks are read again. */
  private async snapshotAfterZoneSplits(settings: ClusterSettings): Promise<{ snapshot: Snapshot; splits: RoundSplit[] }> {
    const snapshot = await this.statistics.roundSnapshot(settings);
    const splits = await this.splitter.splitAtZoneBoundaries(planRoundSplits(snapshot), snapshot);
    const split = new Set(splits.filter((s) => s.outcome === 'split').map((s) => s.ns));
    if (split.size === 0) return { snapshot, splits };
    return { snapshot: await this.statistics.withChunksReread(snapshot, split), splits };
  }

  /**
   * Plans the round over the defragmentation states in memory, and keeps the states it changed.
   * `migrationsThrottlingMs` is MongoDB's between rounds; the continuous scheduler has none.
   */
  private async plan(snapshot: Snapshot, settings: ClusterSettings, migrationsThrottlingMs: number): Promise<BalancerRoundPlan> {
    const defragmenting = snapshot.collections.filter((c) => c.row.defragment_collection);
    for (const c of defragmenting) await this.defragmentation.load(c.row);
    // Read, change and keep the states with no await between: the secondary loop changes them too.
    const states = new Map<string, DefragmentationState>();
    for (const c of defragmenting) {
      const state = this.defragmentation.current(c.row.ns);
      if (state !== undefined) states.set(c.row.ns, state);
    }
    const plan = planRound(
      snapshot,
      {
        defragmentation: states,
        chunkCountInProgress: this.chunkCountInProgress,
        underWay: [...this.mover.underWay],
        lastMigrationEndMs: this.lastMigrationAt,
      },
      settings,
      migrationsThrottlingMs,
      Date.now(),
    );
    const saves = plan.defragmentation.map((state) => this.defragmentation.save(state));
    this.chunkCountInProgress = plan.chunkCountInProgress;
    await Promise.all(saves);
    if (plan.wakeSecondary) this.secondary.signal();
    return plan;
  }

  /** Issues one migration and does what follows its outcome (`followUpMigration`). */
  private async issue(plan: MigrationPlan, collection: SnapshotCollection, issuing: Issuing): Promise<BalancerRoundMigration> {
    const described = describe(plan, collection.pattern);
    if (issuing.skipped.has(plan.namespace)) return { ...described, outcome: 'skipped' };
    let outcome: RoundMigrationOutcome;
    try {
      await this.mover.move(plan, collection.pattern, issuing.settings);
      outcome = { ok: true };
    } catch (error) {
      issuing.errors.push(errorEntry(plan.namespace, error));
      const code = error instanceof TesseraError ? error.code : 'INTERNAL';
      const retryable = error instanceof TesseraError && error.retryable;
      outcome = { ok: false, code, retryable, error: (error as Error).message };
      const level = code === 'CHUNK_TOO_BIG' || code === 'CONFLICTING_OPERATION' ? 'info' : 'warn';
      this.logger[level](
        { err: error, ns: plan.namespace },
        `balancer migration of ${plan.namespace} ${plan.from} -> ${plan.to} failed: ${(error as Error).message}`,
      );
    }
    const followUp = followUpMigration(plan, outcome);
    if (followUp.skipCollection) issuing.skipped.add(plan.namespace);
    if (followUp.defragmentation) await this.onDefragmentationMigration(followUp.defragmentation.action, followUp.defragmentation.outcome);
    if (followUp.splitOrMarkJumbo) issuing.tooBig.push(await this.splitter.splitOrMarkJumbo(plan, collection, issuing.shards));
    return { ...described, outcome: outcome.ok ? 'moved' : 'failed' };
  }

  /** Defragmentation counts its migrations in flight: those not issued go back to be issued again. */
  private async returnNotIssued(migrations: readonly MigrationPlan[]): Promise<void> {
    for (const plan of migrations) {
      const action = defragmentationActionOf(plan);
      if (action) await this.onDefragmentationMigration(action, NOT_ISSUED_OUTCOME);
    }
  }

  private async onDefragmentationMigration(action: DefragmentationAction, outcome: DefragmentationOutcome): Promise<void> {
    const state = this.defragmentation.current(action.namespace);
    if (state === undefined) return;
    await this.defragmentation.save(onDefragmentationOutcome(state, action, outcome));
    this.secondary.signal();
  }
}

function throttleDecisionOf(status: BalancerThrottleStatus): NonNullable<RoundRecord['throttle']> {
  const { state, reason, pauseMs, cloneShare, idleWriteP99Ms, migratingWriteP99Ms } = status;
  return { state, reason, pauseMs, cloneShare, idleWriteP99Ms, migratingWriteP99Ms };
}

function failedSplitErrors(splits: readonly RoundSplit[]): RoundError[] {
  return splits
    .filter((s) => s.outcome === 'failed')
    .map((s) => ({ ns: s.ns, code: 'SPLIT_FAILED', message: 'zone boundary split failed' }));
}
