/**
 * A deterministic balancer simulator (CockroachDB's asim): the production round
 * (`balancer-round.policy.ts`) and the secondary thread's defragmentation actions run over
 * simulated shards holding one collection, on a simulated clock, with durations and failures
 * drawn from a seeded `Random`. Only the state and the clock are fake: same scenario and seed,
 * same report. Main-thread rounds: zone splits, then the round's plan, its migrations starting
 * after the plan's throttle and awaited; the next round after `nextRoundDelayMs`. The secondary
 * thread issues defragmentation merges and data sizes one per `defragmentationThrottlingMS`
 * while the main thread works and sleeps. Snapshots and planning take no simulated time.
 */
import type { ShardId } from '../routing/chunk.js';
import {
  BALANCER_ROUND_INTERVAL_MS,
  BALANCER_MIGRATIONS_THROTTLING_MS,
  DEFAULT_CHUNK_SELECTION_SETTINGS,
  DEFAULT_DEFRAGMENTATION_SETTINGS,
} from './balancer-settings.js';
import type { BalancerRoundSettings, BalancerRoundSnapshot, RoundMigrationOutcome } from './balancer-round.policy.js';
import { followUpMigration, nextRoundDelayMs, planBalancerRound, planZoneBoundarySplits } from './balancer-round.policy.js';
import { layoutKey } from './chunk-layout.js';
import type { CollectionBalanceStatus } from './chunk-selection.policy.js';
import type { DefragmentationAction, DefragmentationOutcome, DefragmentationState } from './defragmentation.machine.js';
import { nextDefragmentationActions, onDefragmentationOutcome, startDefragmentation } from './defragmentation.machine.js';
import type { BalancingMode } from './balancer-settings.js';
import type { CollectionDistribution, MigrationPlan, ShardStatistics, SplitPlan } from './distribution.js';
import { unknownChunkBytesOf } from './distribution-status.js';
import { decideOnSplitVector, isTooBigToMove } from './jumbo.js';
import type { Random } from './seeded-random.js';
import { createSeededRandom, randomInt } from './seeded-random.js';
import { SimulatedCollection } from './simulated-collection.js';
import type { SimulationReport, SimulationScenario } from './simulation-scenario.js';
import { expandChunkRuns } from './simulation-scenario.js';

export * from './simulation-scenario.js';

const NAMESPACE = 'sim.coll';
const MIB = 1024 * 1024;

/** Runs `scenario` to convergence (or `maxRounds`) and returns the report. */
export function simulateBalancing(scenario: SimulationScenario): SimulationReport {
  return new Simulation(scenario).run();
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

class Simulation {
  private readonly random: Random;
  private readonly collection: SimulatedCollection;
  private readonly shards: ShardStatistics[];
  private readonly settings: BalancerRoundSettings;
  private nowMs = 0;
  /** When the last round's migrations ended (MongoDB's lastMigrationTime). */
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
  ) {
    this.random = createSeededRandom(scenario.seed);
    const zones = (scenario.zones ?? []).map((z) => ({ zone: z.zone, range: { min: layoutKey(z.from), max: layoutKey(z.to) } }));
    const runs = recorded === undefined ? expandChunkRuns(scenario.chunks, this.random) : [];
    this.collection = recorded ?? SimulatedCollection.fromRuns(NAMESPACE, runs, zones, scenario.maxChunkSizeBytes);
    this.shards = scenario.shards.map((s) => ({ id: s.id, state: s.draining === true ? 'draining' : 'active', zones: s.zones ?? [] }));
    this.settings = {
      chunkSelection: { ...DEFAULT_CHUNK_SELECTION_SETTINGS, mode: scenario.mode ?? 'dataSize' },
      defragmentation: DEFAULT_DEFRAGMENTATION_SETTINGS,
      migrationsThrottlingMs: scenario.migrationsThrottlingMs ?? BALANCER_MIGRATIONS_THROTTLING_MS,
    };
    if (scenario.defragment === true) this.defrag = startDefragmentation(this.collection.namespace);
  }

  run(): SimulationReport {
    const initialChunks = this.collection.chunks.length;
    const initialBytes = this.collection.totalBytes();
    const maxRounds = this.scenario.maxRounds ?? 20_000;
    let converged = false;
    for (let round = 0; round < maxRounds; round++) {
      if (!this.runRound()) {
        converged = true;
        break;
      }
      this.counters.rounds++;
    }
    return this.report(converged, initialChunks, initialBytes);
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

  private isDefragmenting(): boolean {
    return this.defrag !== undefined && this.defrag.phase !== 'finished';
  }

  private snapshot(): BalancerRoundSnapshot {
    return { shards: this.shards, collections: [{ distribution: this.collection.distribution(), defragmenting: this.isDefragmenting() }] };
  }

  /** One main-thread round and the secondary thread's work meanwhile. Returns whether anything was issued. */
  private runRound(): boolean {
    const roundStart = this.nowMs;
    const wasDefragmenting = this.isDefragmenting();
    const splits = planZoneBoundarySplits(this.snapshot());
    for (const split of splits) this.split(split.range, split.splitPoints);
    const plan = planBalancerRound(
      this.snapshot(),
      {
        defragmentation: new Map(this.isDefragmenting() && this.defrag ? [[this.collection.namespace, this.defrag]] : []),
        chunkCountInProgress: this.chunkCountInProgress,
        busyShards: new Set(),
        lastMigrationEndMs: this.lastMigrationMs,
      },
      this.settings,
      roundStart,
    );
    this.defrag = plan.defragmentation[0] ?? this.defrag;
    this.chunkCountInProgress = plan.chunkCountInProgress;
    this.lastStatus = plan.statuses.find((s) => s.firstComplianceViolation !== 'defragmentingChunks') ?? this.lastStatus;
    const migrations = plan.migrations;
    this.firstRound ??= { splits, migrations, statuses: plan.statuses };
    const migrationsStart = roundStart + plan.throttleMs;
    let roundMs = 0;
    for (const m of migrations) roundMs = Math.max(roundMs, this.migrate(m, migrationsStart));
    const roundEnd = migrationsStart + roundMs;
    if (migrations.length > 0) this.lastMigrationMs = roundEnd;
    const interval = nextRoundDelayMs({ issuedMigrations: migrations.length > 0, woken: false }, BALANCER_ROUND_INTERVAL_MS);
    // The secondary thread works while the main thread sleeps and migrates.
    const secondaryIssued = this.runSecondary(roundStart, roundEnd - roundStart + interval);
    this.nowMs = roundEnd + interval;
    const issued = splits.length > 0 || migrations.length > 0 || secondaryIssued > 0;
    if (issued) this.counters.lastActionMs = Math.max(this.counters.lastActionMs, roundEnd);
    // A defragmentation that is not finished has something in flight or to do; one that ended in
    // this round leaves its collection to the chunk selection policy from the next round on.
    if (wasDefragmenting && !this.isDefragmenting()) return true;
    return issued || (this.isDefragmenting() && this.defrag!.inFlight.length + this.defrag!.retries.length > 0);
  }

  private runSecondary(start: number, windowMs: number): number {
    if (this.defrag === undefined || this.defrag.phase === 'finished') return 0;
    const throttle = DEFAULT_DEFRAGMENTATION_SETTINGS.defragmentationThrottlingMS;
    let issued = 0;
    for (let at = start; at < start + windowMs; at += throttle) {
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
    return issued;
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

  /** Issues one migration of the plan and applies its follow-up; returns its duration. */
  private migrate(m: MigrationPlan, startMs: number): number {
    const { outcome, durationMs } = this.simulateMigration(m, startMs);
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
    return durationMs;
  }

  /** The donor's side: refuses a chunk too big, fails at `failureRate`, else commits the move. A failure changes nothing. */
  private simulateMigration(m: MigrationPlan, startMs: number): { outcome: RoundMigrationOutcome; durationMs: number } {
    const size = this.collection.find(m.range)?.estimatedSizeBytes ?? 0;
    const rate = this.scenario.migrationBytesPerSecond ?? 64 * MIB;
    const overhead = this.scenario.migrationOverheadMs ?? 400;
    const jitter = 0.8 + 0.4 * this.random.nextFloat();
    const durationMs = Math.round((overhead + (size / rate) * 1000) * jitter);
    if (isTooBigToMove(size, this.scenario.maxChunkSizeBytes)) {
      // The donor refuses after a short check.
      this.counters.tooBigRefusals++;
      const error = 'chunk too big to move';
      return { outcome: { ok: false, code: 'CHUNK_TOO_BIG', retryable: false, error }, durationMs: Math.round(overhead * jitter) };
    }
    if (this.random.nextFloat() < (this.scenario.failureRate ?? 0)) {
      this.counters.failedMigrations++;
      return { outcome: { ok: false, code: 'SIMULATED', retryable: true, error: 'simulated failure' }, durationMs };
    }
    this.collection.move(m.range, m.to, startMs + durationMs);
    this.counters.migrations++;
    this.counters.bytesMoved += size;
    this.byReason[m.reason] = (this.byReason[m.reason] ?? 0) + 1;
    return { outcome: { ok: true }, durationMs };
  }

  private split(range: MigrationPlan['range'], points: readonly MigrationPlan['range']['min'][]): void {
    this.collection.split(range, points);
    this.counters.splits++;
  }
}
