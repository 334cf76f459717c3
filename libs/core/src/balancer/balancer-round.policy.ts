/**
 * One round of the balancer's main thread (balancer-internals.md "MainThread"), as pure
 * decisions over a snapshot. The config server's `BalancerRoundService` and the simulator both
 * run a round the same way, only their state and clock differ:
 *
 * 1. `planZoneBoundarySplits(snapshot)`: the splits at zone bounds; the caller issues them, awaits
 *    them and reads the split collections' chunks again;
 * 2. `planBalancerRound(snapshot, state, settings, nowMs)`: defragmentation's migrations, then
 *    the chunk selection policy's on the shards left, each with its reason, each collection's
 *    compliance, the states to keep and the migration throttle to sleep first;
 * 3. the caller issues the migrations and hands each outcome to `followUpMigration`: feed the
 *    defragmentation machine, skip the collection's other migrations, or split the chunk refused
 *    as too big (`decideOnSplitVector`) or mark it jumbo;
 * 4. the next round starts after `nextRoundDelayMs`.
 */
import type { ChunkSelectionSettings, DefragmentationSettings } from './balancer-settings.js';
import type { CollectionBalanceStatus } from './chunk-selection.policy.js';
import { selectMigrations, selectZoneBoundarySplits } from './chunk-selection.policy.js';
import type { DefragmentationAction, DefragmentationOutcome, DefragmentationState } from './defragmentation.machine.js';
import { nextDefragmentationMigrations } from './defragmentation.machine.js';
import type { CollectionDistribution, MigrationPlan, ShardStatistics, SplitPlan } from './distribution.js';
import { MigrationSlots, type MigrationUnderWay } from './migration-slots.js';
import { migrationThrottleMs } from './migration-throttle.js';

/** One collection of a round's snapshot. */
export interface RoundCollection {
  readonly distribution: CollectionDistribution;
  /** `defragmentCollection`: only the defragmentation machine moves its chunks. */
  readonly defragmenting: boolean;
}

/** What a round reads of the cluster (MongoDB's ClusterStatistics and DistributionStatus). */
export interface BalancerRoundSnapshot {
  readonly shards: readonly ShardStatistics[];
  readonly collections: readonly RoundCollection[];
}

/** What a round carries over from the previous ones. */
export interface BalancerRoundState {
  /** Each defragmenting collection's machine state, by namespace (none: not started yet). */
  readonly defragmentation: ReadonlyMap<string, DefragmentationState>;
  /** `chunkCountThreshold` mode: collections the previous round left unbalanced. */
  readonly chunkCountInProgress: ReadonlySet<string>;
  /** The shards of the migrations under way: earlier rounds' (continuous scheduler) and top chunks' moves. */
  readonly underWay: readonly MigrationUnderWay[];
  /** When the previous round's migrations ended (MongoDB's lastMigrationTime); null: none yet. */
  readonly lastMigrationEndMs: number | null;
}

/** The settings one round reads: the chunk selection policy's and defragmentation's. */
export interface BalancerRoundSettings {
  readonly chunkSelection: ChunkSelectionSettings;
  readonly defragmentation: DefragmentationSettings;
  /** `balancerMigrationsThrottlingMs`. */
  readonly migrationsThrottlingMs: number;
}

/** A round's decisions, as data. */
export interface BalancerRoundPlan {
  /** Defragmentation's migrations first, then the chunk selection policy's, each in a free slot (`MigrationSlots`). */
  readonly migrations: readonly MigrationPlan[];
  /** Each collection's compliance: the defragmenting ones first (`defragmentingChunks`). */
  readonly statuses: readonly CollectionBalanceStatus[];
  /** The defragmentation states with this round's migrations in flight, to keep. */
  readonly defragmentation: readonly DefragmentationState[];
  /** `chunkCountInProgress` for the next round. */
  readonly chunkCountInProgress: ReadonlySet<string>;
  /** How long to sleep before issuing the migrations (0 with none to issue). */
  readonly throttleMs: number;
  /** Some collection is being defragmented: its merges and data sizes are the secondary thread's. */
  readonly wakeSecondary: boolean;
}

/** Step 1: the splits that make every chunk lie inside or outside each zone range. */
export function planZoneBoundarySplits(snapshot: BalancerRoundSnapshot): SplitPlan[] {
  return snapshot.collections.flatMap((c) => selectZoneBoundarySplits(c.distribution));
}

/** Step 2: the round's migrations with their reasons, and what to keep for the next round. */
export function planBalancerRound(
  snapshot: BalancerRoundSnapshot,
  state: BalancerRoundState,
  settings: BalancerRoundSettings,
  nowMs: number,
): BalancerRoundPlan {
  const defragmenting = snapshot.collections.filter((c) => c.defragmenting);
  const slots = new MigrationSlots(settings.chunkSelection.maxDonationsPerShard ?? 1, state.underWay);
  const defragmentation = planDefragmentationMigrations(defragmenting, state, settings.defragmentation, slots);
  const balanced = snapshot.collections
    .filter((c) => !c.defragmenting && c.distribution.balancingEnabled !== false)
    .map((c) => ({ ...c.distribution, chunkCountBalancingInProgress: state.chunkCountInProgress.has(c.distribution.namespace) }));
  const selection = selectMigrations(snapshot.shards, balanced, settings.chunkSelection, slots);
  const chunkCountInProgress = new Set(state.chunkCountInProgress);
  for (const status of selection.collections) {
    if (status.chunkCountBalancingInProgress) chunkCountInProgress.add(status.namespace);
    else chunkCountInProgress.delete(status.namespace);
  }
  const migrations = [...defragmentation.migrations, ...selection.migrations];
  return {
    migrations,
    statuses: [...defragmenting.map((c) => defragmentingStatus(c.distribution.namespace)), ...selection.collections],
    defragmentation: defragmentation.states,
    chunkCountInProgress,
    throttleMs: migrations.length > 0 ? migrationThrottleMs(settings.migrationsThrottlingMs, state.lastMigrationEndMs, nowMs) : 0,
    wakeSecondary: defragmenting.length > 0,
  };
}

/**
 * Phase 2 migrations of each defragmenting collection that has a state, in order, none using a
 * shard in a migration or one shard twice; they take their slots from `slots`, which the chunk
 * selection policy then uses.
 */
function planDefragmentationMigrations(
  collections: readonly RoundCollection[],
  state: BalancerRoundState,
  settings: DefragmentationSettings,
  slots: MigrationSlots,
): { migrations: MigrationPlan[]; states: DefragmentationState[] } {
  const busy = slots.involved();
  const migrations: MigrationPlan[] = [];
  const states: DefragmentationState[] = [];
  for (const { distribution } of collections) {
    const current = state.defragmentation.get(distribution.namespace);
    if (current === undefined) continue;
    const snapshot = { chunks: distribution.chunks, maxChunkSizeBytes: distribution.maxChunkSizeBytes };
    const next = nextDefragmentationMigrations(current, snapshot, settings, busy);
    states.push(next.state);
    for (const m of next.migrations) {
      busy.add(m.from).add(m.to);
      slots.take(m.from, m.to);
    }
    migrations.push(...next.migrations);
  }
  return { migrations, states };
}

function defragmentingStatus(namespace: string): CollectionBalanceStatus {
  return {
    namespace,
    balancerCompliant: false,
    firstComplianceViolation: 'defragmentingChunks',
    jumboChunksSkipped: 0,
    chunkCountBalancingInProgress: false,
  };
}

/** How an issued migration ended: `code` is the error's code (`CHUNK_TOO_BIG`, ...). */
export type RoundMigrationOutcome =
  { readonly ok: true } | { readonly ok: false; readonly code: string; readonly retryable: boolean; readonly error: string };

/** What the round does after one of its migrations ended. */
export interface MigrationFollowUp {
  /** A defragmentation migration's outcome, for `onDefragmentationOutcome`. */
  readonly defragmentation?: { readonly action: DefragmentationAction; readonly outcome: DefragmentationOutcome };
  /** Refused as too big: ask the donor's `splitVector`, then split or mark jumbo. */
  readonly splitOrMarkJumbo: boolean;
  /** Another operation holds the collection: its other migrations of the round are skipped. */
  readonly skipCollection: boolean;
}

/** Step 3: what follows the outcome of `plan` (balancer-internals.md "Jumbo chunks"). */
export function followUpMigration(plan: MigrationPlan, outcome: RoundMigrationOutcome): MigrationFollowUp {
  const action = defragmentationActionOf(plan);
  const defragmentation = action && {
    action,
    outcome: outcome.ok ? ({ ok: true } as const) : { ok: false as const, retryable: outcome.retryable, error: outcome.error },
  };
  return {
    ...(defragmentation === undefined ? {} : { defragmentation }),
    splitOrMarkJumbo: !outcome.ok && action === undefined && outcome.code === 'CHUNK_TOO_BIG',
    skipCollection: !outcome.ok && outcome.code === 'CONFLICTING_OPERATION',
  };
}

/** A defragmentation migration as the machine's action (for `onDefragmentationOutcome`); none for other reasons. */
export function defragmentationActionOf(plan: MigrationPlan): DefragmentationAction | undefined {
  if (plan.reason !== 'defragmentation') return undefined;
  return { kind: 'migrate', namespace: plan.namespace, shard: plan.from, to: plan.to, range: plan.range };
}

/** The outcome of a defragmentation migration selected but not issued: it goes back to be issued again. */
export const NOT_ISSUED_OUTCOME: DefragmentationOutcome = { ok: false, retryable: true, error: 'not issued: the balancer was woken' };

/**
 * Step 4: as MongoDB's, a round that issued migrations is followed by the next at once (the
 * migration throttle is applied before that round's migrations); so is one woken meanwhile.
 */
export function nextRoundDelayMs(round: { readonly issuedMigrations: boolean; readonly woken: boolean }, intervalMs: number): number {
  return round.woken || round.issuedMigrations ? 0 : intervalMs;
}

/** Why a round issued nothing, for its changelog row. */
export function explainIdleRound(statuses: readonly CollectionBalanceStatus[], collections: number, interrupted: boolean): string {
  if (interrupted) return 'woken before its migrations: the next round selects again at once';
  if (collections === 0) return 'no sharded collection has balancing enabled';
  if (statuses.every((s) => s.balancerCompliant)) return 'every collection is balanced';
  if (statuses.some((s) => s.firstComplianceViolation === 'defragmentingChunks'))
    return 'defragmentation has no migration to issue now (merges and data sizes run in the secondary loop)';
  return 'no migration possible (shards busy, jumbo chunks or no eligible recipient)';
}
