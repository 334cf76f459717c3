/**
 * A deterministic balancer simulator (CockroachDB's asim): the production round
 * (`balancer-round.policy.ts`) and the secondary thread's defragmentation actions run over
 * simulated shards holding one collection, on a simulated clock, with durations and failures
 * drawn from a seeded `Random`. Only the state and the clock are fake: same scenario and seed,
 * same report. The main thread runs one of two schedulers:
 * - `rounds`: zone splits, then the round's plan, its migrations starting after the plan's
 *   throttle and awaited; the next round after `nextRoundDelayMs`. A migration is committed when
 *   issued (with its end time), as nothing plans again before it ends;
 * - `continuous` (`continuous-simulation.ts`): the same planning again as soon as a migration
 *   ends, each migration committed when it ends.
 * The secondary thread issues defragmentation merges and data sizes one per
 * `defragmentationThrottlingMS` while the main thread works and sleeps. Snapshots and planning
 * take no simulated time.
 */
import type { ShardId } from '../routing/chunk.js';
import {
  BALANCER_ROUND_INTERVAL_MS,
  BALANCER_MIGRATIONS_THROTTLING_MS,
  DEFAULT_CHUNK_SELECTION_SETTINGS,
  DEFAULT_DEFRAGMENTATION_SETTINGS,
} from './balancer-settings.js';
import type { BalancerRoundSettings, BalancerRoundSnapshot } from './balancer-round.policy.js';
import { followUpMigration, nextRoundDelayMs, planBalancerRound, planZoneBoundarySplits } from './balancer-round.policy.js';
import { layoutKey } from './chunk-layout.js';
import type { CollectionBalanceStatus } from './chunk-selection.policy.js';
import type { ContinuousSimulationCluster, IssuedMigration } from './continuous-simulation.js';
import { runContinuousScheduler } from './continuous-simulation.js';
import type { DefragmentationAction, DefragmentationOutcome, DefragmentationState } from './defragmentation.machine.js';
import { nextDefragmentationActions, onDefragmentationOutcome, startDefragmentation } from './defragmentation.machine.js';
import type { BalancerScheduler, BalancingMode } from './balancer-settings.js';
import type { CollectionDistribution, MigrationPlan, ShardStatistics, SplitPlan } from './distribution.js';
import { unknownChunkBytesOf } from './distribution-status.js';
import type { MigrationUnderWay } from './migration-slots.js';
import { decideOnSplitVector, isTooBigToMove } from './jumbo.js';
import type { Random } from './seeded-random.js';
import { createSeededRandom, randomInt } from './seeded-random.js';
import { SimulatedCollection } from './simulated-collection.js';
import type { SimulationObserver, SimulationReport, SimulationScenario } from './simulation-scenario.js';
import { expandChunkRuns } from './simulation-scenario.js';

export * from './simulation-scenario.js';

const NAMESPACE = 'sim.coll';
const MIB = 1024 * 1024;

/** Runs `scenario` to convergence (or `maxRounds`) and returns the report; `observer` watches its plannings and migrations. */
export function simulateBalancing(scenario: SimulationScenario, observer: SimulationObserver = {}): SimulationReport {
  return new Simulation(scenario, undefined, observer).run();
}

/** A recorded snapshot of one collection, as the simulator's starting state. */
export interface RecordedCollectionSnapshot {
  readonly shards: readonly ShardStatistics[];
  /**
   * Its chunks, zones and max chunk size; each shard's bytes are the sum of its chunks' sizes, or
   * the recorded `shardDataSizeBytes`, shared among the chunks with no size as the policy shares them.
   */
  readonly collection: CollectionDistribution;
  readonly mode?: BalancingMode;
}

/** What one main-thread round issued. */
export interface SimulatedRound {
  readonly splits: readonly SplitPlan[];
  readonly migrations: readonly MigrationPlan[];
  readonly statuses: readonly CollectionBalanceStatus[];
}

/** Runs the simulator's first main-thread round from `recorded` and answers what it issued. */
export function simulateFirstRound(recorded: RecordedCollectionSnapshot): SimulatedRound {
  const { namespace, zones, maxChunkSizeBytes, shardDataSizeBytes } = recorded.collection;
  const shares = unknownChunkBytesOf(recorded.collection.chunks, shardDataSizeBytes ?? {});
  const chunks = recorded.collection.chunks.map((c) => {
    const share = c.estimatedSizeBytes === undefined ? shares.get(c.shard) : undefined;
    return share === undefined ? c : { ...c, estimatedSizeBytes: share };
  });
  const scenario: SimulationScenario = {
    name: namespace,
    seed: 0,
    maxChunkSizeBytes,
    ...(recorded.mode === undefined ? {} : { mode: recorded.mode }),
    shards: recorded.shards.map((s) => ({ id: s.id, zones: s.zones, draining: s.state === 'draining' })),
    chunks: [],
    maxRounds: 1,
  };
  const simulation = new Simulation(scenario, new SimulatedCollection(namespace, chunks, zones, maxChunkSizeBytes));
  simulation.run();
  return simulation.firstRound!;
}

class Simulation implements ContinuousSimulationCluster {
  private readonly random: Random;
  private readonly collection: SimulatedCollection;
  private readonly shards: ShardStatistics[];
  private readonly settings: BalancerRoundSettings;
  /** The rounds scheduler's clock (the continuous one keeps its own). */
  private nowMs = 0;
  /**
   * When the last round's migrations ended (MongoDB's lastMigrationTime). Stays null under the
   * continuous scheduler, which has no migration throttle, so its plans' `throttleMs` is 0.
   */
  private lastMigrationMs: number | null = null;
  private defrag: DefragmentationState | undefined;
  private chunkCountInProgress: ReadonlySet<string> = new Set();
  private lastStatus: CollectionBalanceStatus | undefined;
  private readonly counters = {
    rounds: 0,
    migrations: 0,
    failedMigrations: 0,
    tooBigRefusals: 0,
    bytesMoved: 0,
    splits: 0,
    merges: 0,
    dataSizes: 0,
    lastActionMs: 0,
  };
  private readonly byReason: Record<string, number> = {};

  /** What the first main-thread round issued. */
  firstRound: SimulatedRound | undefined;

  constructor(
    private readonly scenario: SimulationScenario,
    recorded?: SimulatedCollection,
    private readonly observer: SimulationObserver = {},
  ) {
    this.random = createSeededRandom(scenario.seed);
    const zones = (scenario.zones ?? []).map((z) => ({ zone: z.zone, range: { min: layoutKey(z.from), max: layoutKey(z.to) } }));
    const runs = recorded === undefined ? expandChunkRuns(scenario.chunks, this.random) : [];
    this.collection = recorded ?? SimulatedCollection.fromRuns(NAMESPACE, runs, zones, scenario.maxChunkSizeBytes);
    this.shards = scenario.shards.map((s) => ({ id: s.id, state: s.draining === true ? 'draining' : 'active', zones: s.zones ?? [] }));
    this.settings = {
      chunkSelection: {
        ...DEFAULT_CHUNK_SELECTION_SETTINGS,
        mode: scenario.mode ?? 'dataSize',
        maxDonationsPerShard: scenario.maxDonationsPerShard === 0 ? Infinity : (scenario.maxDonationsPerShard ?? 1),
      },
      defragmentation: DEFAULT_DEFRAGMENTATION_SETTINGS,
      migrationsThrottlingMs: scenario.migrationsThrottlingMs ?? BALANCER_MIGRATIONS_THROTTLING_MS,
    };
    if (scenario.defragment === true) this.defrag = startDefragmentation(this.collection.namespace);
  }

  run(): SimulationReport {
    const initialChunks = this.collection.chunks.length;
    const initialBytes = this.collection.totalBytes();
    const maxRounds = this.scenario.maxRounds ?? 20_000;
    const converged = this.scheduler() === 'continuous' ? this.runContinuously(maxRounds) : this.runRounds(maxRounds);
    return this.report(converged, initialChunks, initialBytes);
  }

  private scheduler(): BalancerScheduler {
    return this.scenario.scheduler ?? 'rounds';
  }

  private runRounds(maxRounds: number): boolean {
    for (let round = 0; round < maxRounds; round++) {
      if (!this.runRound()) return true;
      this.counters.rounds++;
    }
    return false;
  }

  private runContinuously(maxPlannings: number): boolean {
    const { converged, issuingPlannings } = runContinuousScheduler(this, maxPlannings);
    this.counters.rounds = issuingPlannings;
    return converged;
  }

  private report(converged: boolean, initialChunks: number, initialBytes: number): SimulationReport {
    const chunks = this.collection.chunks;
    const perShard: Record<ShardId, { chunks: number; bytes: number }> = {};
    for (const s of this.shards) perShard[s.id] = { chunks: 0, bytes: 0 };
    for (const c of chunks) {
      const entry = perShard[c.shard] ?? { chunks: 0, bytes: 0 };
      perShard[c.shard] = { chunks: entry.chunks + 1, bytes: entry.bytes + (c.estimatedSizeBytes ?? 0) };
    }
    const activeBytes = this.shards.filter((s) => s.state === 'active').map((s) => perShard[s.id]?.bytes ?? 0);
    const { lastActionMs, ...counters } = this.counters;
    return {
      scenario: this.scenario.name,
      seed: this.scenario.seed,
      scheduler: this.scheduler(),
      converged,
      ...counters,
      simulatedMs: lastActionMs,
      jumboChunks: chunks.filter((c) => c.jumbo === true).length,
      initialChunks,
      finalChunks: chunks.length,
      initialBytes,
      finalBytes: this.collection.totalBytes(),
      maxShardBytes: Math.max(...activeBytes),
      minShardBytes: Math.min(...activeBytes),
      shards: perShard,
      status: this.lastStatus,
      migrationsByReason: { ...this.byReason },
    };
  }

  isDefragmenting(): boolean {
    return this.defrag !== undefined && this.defrag.phase !== 'finished';
  }

  hasDefragmentationWorkPending(): boolean {
    return this.isDefragmenting() && this.defrag!.inFlight.length + this.defrag!.retries.length > 0;
  }

  private snapshot(): BalancerRoundSnapshot {
    return { shards: this.shards, collections: [{ distribution: this.collection.distribution(), defragmenting: this.isDefragmenting() }] };
  }

  /**
   * The main thread's planning: splits at zone bounds, issued at once, then the production plan
   * in the slots the migrations under way leave. Keeps the state it carries over to the next planning.
   */
  plan(nowMs: number, underWay: readonly MigrationUnderWay[]): SimulatedRound & { readonly throttleMs: number } {
    const splits = planZoneBoundarySplits(this.snapshot());
    for (const split of splits) this.split(split.range, split.splitPoints);
    if (splits.length > 0) this.counters.lastActionMs = Math.max(this.counters.lastActionMs, nowMs);
    const plan = planBalancerRound(
      this.snapshot(),
      {
        defragmentation: new Map(this.isDefragmenting() && this.defrag ? [[this.collection.namespace, this.defrag]] : []),
        chunkCountInProgress: this.chunkCountInProgress,
        underWay,
        lastMigrationEndMs: this.lastMigrationMs,
      },
      this.settings,
      nowMs,
    );
    this.defrag = plan.defragmentation[0] ?? this.defrag;
    this.chunkCountInProgress = plan.chunkCountInProgress;
    this.lastStatus = plan.statuses.find((s) => s.firstComplianceViolation !== 'defragmentingChunks') ?? this.lastStatus;
    const round = { splits, migrations: plan.migrations, statuses: plan.statuses };
    this.firstRound ??= round;
    // A copy of the chunks the policy read: the collection changes its array in place.
    this.observer.planned?.({ nowMs, underWay, chunks: [...this.collection.chunks], migrations: plan.migrations });
    return { ...round, throttleMs: plan.throttleMs };
  }

  /** One main-thread round and the secondary thread's work meanwhile. Returns whether anything was issued. */
  private runRound(): boolean {
    const roundStart = this.nowMs;
    const wasDefragmenting = this.isDefragmenting();
    const { splits, migrations, throttleMs } = this.plan(roundStart, []);
    const migrationsStart = roundStart + throttleMs;
    let roundMs = 0;
    for (const m of migrations) roundMs = Math.max(roundMs, this.migrate(m, migrationsStart));
    const roundEnd = migrationsStart + roundMs;
    if (migrations.length > 0) this.lastMigrationMs = roundEnd;
    const interval = nextRoundDelayMs({ issuedMigrations: migrations.length > 0, woken: false }, BALANCER_ROUND_INTERVAL_MS);
    // The secondary thread works while the main thread sleeps and migrates.
    const secondaryIssued = this.runSecondary(roundStart, roundEnd + interval).issued;
    this.nowMs = roundEnd + interval;
    const issued = splits.length > 0 || migrations.length > 0 || secondaryIssued > 0;
    if (issued) this.counters.lastActionMs = Math.max(this.counters.lastActionMs, roundEnd);
    // A defragmentation that is not finished has something in flight or to do; one that ended in
    // this round leaves its collection to the chunk selection policy from the next round on.
    if (wasDefragmenting && !this.isDefragmenting()) return true;
    return issued || this.hasDefragmentationWorkPending();
  }

  /**
   * The secondary thread from `fromMs` until `untilMs`, one action per throttle; stops early when
   * defragmentation has nothing to issue (the next planning signals it again).
   */
  runSecondary(fromMs: number, untilMs: number): { issued: number; nextAtMs: number } {
    if (this.defrag === undefined || this.defrag.phase === 'finished') return { issued: 0, nextAtMs: fromMs };
    const throttle = DEFAULT_DEFRAGMENTATION_SETTINGS.defragmentationThrottlingMS;
    let issued = 0;
    let at = fromMs;
    for (; at < untilMs; at += throttle) {
      const snapshot = { chunks: this.collection.chunks, maxChunkSizeBytes: this.scenario.maxChunkSizeBytes };
      const next = nextDefragmentationActions(this.defrag, snapshot, DEFAULT_DEFRAGMENTATION_SETTINGS, 1);
      this.defrag = next.state;
      const action = next.actions[0];
      if (action === undefined) break;
      issued++;
      const doneAt = at + 20 + randomInt(this.random, 0, 80);
      this.counters.lastActionMs = Math.max(this.counters.lastActionMs, doneAt);
      this.defrag = onDefragmentationOutcome(this.defrag, action, this.applySecondary(action, doneAt));
    }
    return { issued, nextAtMs: at };
  }

  private applySecondary(action: DefragmentationAction, atMs: number): DefragmentationOutcome {
    switch (action.kind) {
      case 'dataSize':
        this.counters.dataSizes++;
        return { ok: true, dataSizeBytes: this.collection.find(action.range)?.estimatedSizeBytes ?? 0 };
      case 'merge':
        this.collection.merge(action.parts, atMs);
        this.counters.merges++;
        return { ok: true };
      case 'migrate':
        return { ok: true };
    }
  }

  /** Issues one migration of a round and applies its end at once; returns its duration. */
  private migrate(m: MigrationPlan, startMs: number): number {
    const migration = this.issueMigration(m);
    this.endMigration(migration, startMs, startMs + migration.durationMs);
    return migration.durationMs;
  }

  /**
   * Draws how the donor's side of `m` will end and how long it takes: it refuses a chunk too big
   * after a short check, fails at `failureRate`, else moves the chunk. Changes nothing yet.
   */
  issueMigration(m: MigrationPlan): IssuedMigration {
    const sizeBytes = this.collection.find(m.range)?.estimatedSizeBytes ?? 0;
    const rate = this.scenario.migrationBytesPerSecond ?? 64 * MIB;
    const overhead = this.scenario.migrationOverheadMs ?? 400;
    const jitter = 0.8 + 0.4 * this.random.nextFloat();
    const durationMs = Math.round((overhead + (sizeBytes / rate) * 1000) * jitter);
    if (isTooBigToMove(sizeBytes, this.scenario.maxChunkSizeBytes)) {
      const error = 'chunk too big to move';
      return {
        plan: m,
        outcome: { ok: false, code: 'CHUNK_TOO_BIG', retryable: false, error },
        durationMs: Math.round(overhead * jitter),
        sizeBytes,
      };
    }
    if (this.random.nextFloat() < (this.scenario.failureRate ?? 0))
      return { plan: m, outcome: { ok: false, code: 'SIMULATED', retryable: true, error: 'simulated failure' }, durationMs, sizeBytes };
    return { plan: m, outcome: { ok: true }, durationMs, sizeBytes };
  }

  /** Commits a successful migration at `endMs` (a failed one changes nothing), then applies its follow-up. */
  endMigration(migration: IssuedMigration, startMs: number, endMs: number): void {
    const { plan: m, outcome } = migration;
    this.counters.lastActionMs = Math.max(this.counters.lastActionMs, endMs);
    if (outcome.ok) {
      this.collection.move(m.range, m.to, endMs);
      this.counters.migrations++;
      this.counters.bytesMoved += migration.sizeBytes;
      this.byReason[m.reason] = (this.byReason[m.reason] ?? 0) + 1;
    } else if (outcome.code === 'CHUNK_TOO_BIG') this.counters.tooBigRefusals++;
    else this.counters.failedMigrations++;
    const followUp = followUpMigration(m, outcome);
    if (followUp.defragmentation && this.defrag)
      this.defrag = onDefragmentationOutcome(this.defrag, followUp.defragmentation.action, followUp.defragmentation.outcome);
    if (followUp.splitOrMarkJumbo) {
      const chunk = this.collection.find(m.range)!;
      const points = this.collection.splitVector(chunk);
      const decision = decideOnSplitVector(points, points.length === 0);
      if (decision.action === 'split') this.split(chunk.range, decision.splitPoints);
      else if (decision.action === 'markJumbo') this.collection.markJumbo(chunk.range);
    }
    this.observer.migrationEnded?.({ plan: m, startMs, endMs, ok: outcome.ok });
  }

  private split(range: MigrationPlan['range'], points: readonly MigrationPlan['range']['min'][]): void {
    this.collection.split(range, points);
    this.counters.splits++;
  }
}
