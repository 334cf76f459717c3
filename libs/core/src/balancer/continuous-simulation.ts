/**
 * The simulator's `continuous` scheduler: an event loop over the migrations in flight, by end
 * time. The leader plans at start and as soon as a migration ends, with the slots of the
 * migrations still in flight taken (`MigrationSlots`), and issues what it plans at once: no round barrier and no
 * `balancerMigrationsThrottlingMs` sleep. A migration changes the collection only when it ends,
 * so a planning meanwhile sees its chunk still on the donor. The secondary thread runs over the
 * time between two planning events, one action per `defragmentationThrottlingMS` across them.
 */
import type { RoundMigrationOutcome } from './balancer-round.policy.js';
import { BALANCER_ROUND_INTERVAL_MS } from './balancer-settings.js';
import type { MigrationPlan, SplitPlan } from './distribution.js';
import type { MigrationUnderWay } from './migration-slots.js';

/** A migration as issued: how it will end and how long it takes, drawn when issued. */
export interface IssuedMigration {
  readonly plan: MigrationPlan;
  readonly outcome: RoundMigrationOutcome;
  readonly durationMs: number;
  readonly sizeBytes: number;
}

/** What the loop drives: the simulated cluster and the production policies over it. */
export interface ContinuousSimulationCluster {
  /** Splits at zone bounds, then `planBalancerRound` with the migrations under way: what to issue now. */
  plan(
    nowMs: number,
    underWay: readonly MigrationUnderWay[],
  ): { readonly splits: readonly SplitPlan[]; readonly migrations: readonly MigrationPlan[] };
  /** Draws how `plan` will end and how long it takes; changes nothing yet. */
  issueMigration(plan: MigrationPlan): IssuedMigration;
  /** Applies the end of `migration`: commits the move when it succeeded, then its follow-up. */
  endMigration(migration: IssuedMigration, startMs: number, endMs: number): void;
  /** Runs the secondary thread from `fromMs` until `untilMs`: how many actions it issued, and when its next may go. */
  runSecondary(fromMs: number, untilMs: number): { readonly issued: number; readonly nextAtMs: number };
  isDefragmenting(): boolean;
  /** Defragmentation has an action in flight or to retry: not done even when nothing was issued. */
  hasDefragmentationWorkPending(): boolean;
}

interface InFlightMigration {
  readonly migration: IssuedMigration;
  readonly startMs: number;
  readonly endMs: number;
  /** Issue order, to end migrations with the same end time in a stable order. */
  readonly order: number;
}

/**
 * Runs the loop until a planning with nothing in flight issues nothing (the rounds scheduler's
 * convergence rule) or after `maxPlannings` planning events.
 */
export function runContinuousScheduler(
  cluster: ContinuousSimulationCluster,
  maxPlannings: number,
): { readonly converged: boolean; readonly issuingPlannings: number } {
  const inFlight: InFlightMigration[] = [];
  let nowMs = 0;
  let issued = 0;
  let issuingPlannings = 0;
  let secondaryAtMs = 0;
  const runSecondaryUntil = (untilMs: number): number => {
    const secondary = cluster.runSecondary(Math.max(secondaryAtMs, nowMs), untilMs);
    secondaryAtMs = secondary.nextAtMs;
    return secondary.issued;
  };
  for (let planning = 0; planning < maxPlannings; planning++) {
    const wasDefragmenting = cluster.isDefragmenting();
    const { splits, migrations } = cluster.plan(
      nowMs,
      inFlight.map((f) => f.migration.plan),
    );
    for (const plan of migrations) {
      const migration = cluster.issueMigration(plan);
      insertByEnd(inFlight, { migration, startMs: nowMs, endMs: nowMs + migration.durationMs, order: issued++ });
    }
    if (splits.length > 0 || migrations.length > 0) issuingPlannings++;
    const next = inFlight[0];
    if (next === undefined) {
      // Nothing in flight and nothing to issue: the leader sleeps the round interval while the
      // secondary thread works, then plans again; it has converged when nothing at all happened.
      const secondaryIssued = runSecondaryUntil(nowMs + BALANCER_ROUND_INTERVAL_MS);
      const defragmentationEnded = wasDefragmenting && !cluster.isDefragmenting();
      if (splits.length === 0 && secondaryIssued === 0 && !defragmentationEnded && !cluster.hasDefragmentationWorkPending())
        return { converged: true, issuingPlannings };
      nowMs += BALANCER_ROUND_INTERVAL_MS;
      continue;
    }
    runSecondaryUntil(next.endMs);
    nowMs = next.endMs;
    while (inFlight[0] !== undefined && inFlight[0].endMs === nowMs) {
      const ended = inFlight.shift() as InFlightMigration;
      cluster.endMigration(ended.migration, ended.startMs, ended.endMs);
    }
  }
  return { converged: false, issuingPlannings };
}

/** Keeps `inFlight` sorted by end time, then issue order. */
function insertByEnd(inFlight: InFlightMigration[], migration: InFlightMigration): void {
  const at = inFlight.findIndex((f) => f.endMs > migration.endMs);
  inFlight.splice(at === -1 ? inFlight.length : at, 0, migration);
}
