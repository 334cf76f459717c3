/**
 * A deterministic balancer simulator: the real policies (chunk selection, zone splits,
 * defragmentation) run over simulated shards holding one collection, on a simulated clock,
 * with durations and failures drawn from a seeded `Random`. Same scenario and seed, same
 * report. It models the balancer's two threads: the main thread's rounds (splits, then
 * defragmentation migrations, then chunk selection migrations, awaited, after the migration
 * throttle: they start no sooner than `balancerMigrationsThrottlingMs` after the previous round's
 * ended; the next round at once after a round that issued migrations, else 10 s later), and the
 * secondary thread, which issues defragmentation merges and data sizes one per
 * `defragmentationThrottlingMS` while the main thread works and sleeps. Snapshots and selection
 * take no simulated time.
 */
import { splitChunk, mergeChunks, moveChunk } from '../routing/chunk-operations.js';
import type { ShardId } from '../routing/chunk.js';
import { rangesEqual } from '../ranges/chunk-range.js';
import type { ChunkVersion } from '../versions/chunk-version.js';
import { maxChunkVersion } from '../versions/chunk-version.js';
import type { ClusterTimestamp } from '../versions/cluster-timestamp.js';
import type { BalancingMode } from './balancer-settings.js';
import {
  BALANCER_ROUND_INTERVAL_MS,
  BALANCER_MIGRATIONS_THROTTLING_MS,
  DEFAULT_CHUNK_SELECTION_SETTINGS,
  DEFAULT_DEFRAGMENTATION_SETTINGS,
} from './balancer-settings.js';
import type { ChunkRun } from './chunk-layout.js';
import { layoutChunks, layoutKey } from './chunk-layout.js';
import type { CollectionBalanceStatus } from './chunk-selection.policy.js';
import { selectMigrations, selectZoneBoundarySplits } from './chunk-selection.policy.js';
import type { DefragmentationAction, DefragmentationState } from './defragmentation.machine.js';
import {
  nextDefragmentationActions,
  nextDefragmentationMigrations,
  onDefragmentationOutcome,
  startDefragmentation,
} from './defragmentation.machine.js';
import type { CollectionDistribution, MigrationPlan, ShardStatistics, SizedChunk, ZoneRange } from './distribution.js';
import { rangeKey, sortChunks } from './distribution.js';
import { decideOnChunkTooBig, isTooBigToMove } from './jumbo.js';
import { migrationThrottleMs } from './migration-throttle.js';
import type { Random } from './seeded-random.js';
import { createSeededRandom, randomInt } from './seeded-random.js';

/** A size in bytes, fixed or drawn uniformly from `[min, max]`. */
export type SimulatedSize = number | { readonly min: number; readonly max: number };

/** Consecutive chunks in key order: `count` chunks on `shard`, or on `shards` in runs of random length. */
export type SimulatedChunkRun =
  | { readonly shard: ShardId; readonly count: number; readonly sizeBytes: SimulatedSize; readonly unsplittable?: boolean }
  | {
      readonly shards: readonly ShardId[];
      readonly count: number;
      readonly sizeBytes: SimulatedSize;
      readonly runLength: { readonly min: number; readonly max: number };
    };

/** A scenario, as the JSON files under `tools/sim/scenarios/` hold it. */
export interface SimulationScenario {
  readonly name: string;
  readonly description?: string;
  readonly seed: number;
  readonly maxChunkSizeBytes: number;
  /** Chunk selection mode; default `dataSize`. */
  readonly mode?: BalancingMode;
  readonly shards: readonly { readonly id: ShardId; readonly zones?: readonly string[]; readonly draining?: boolean }[];
  readonly chunks: readonly SimulatedChunkRun[];
  /** Zone ranges in chunk positions of the initial layout (`[from, to)`; fractions cut chunks). */
  readonly zones?: readonly { readonly zone: string; readonly from: number; readonly to: number }[];
  /** Defragment the collection from the start. */
  readonly defragment?: boolean;
  /** Cloning rate of a migration; default 64 MiB/s. */
  readonly migrationBytesPerSecond?: number;
  /** Fixed cost of a migration (critical section, commit, refresh); default 400 ms. */
  readonly migrationOverheadMs?: number;
  /** balancerMigrationsThrottlingMs; default `BALANCER_MIGRATIONS_THROTTLING_MS` (1,000). */
  readonly migrationsThrottlingMs?: number;
  /** Probability that a migration fails (retryably); default 0. */
  readonly failureRate?: number;
  /** Give up after this many rounds; default 20,000. */
  readonly maxRounds?: number;
}

/** What a simulation found. */
export interface SimulationReport {
  readonly scenario: string;
  readonly seed: number;
  /** True when the policies had nothing left to do before `maxRounds`. */
  readonly converged: boolean;
  /** Main-thread rounds that issued something. */
  readonly rounds: number;
  /** Simulated time until the last action completed. */
  readonly simulatedMs: number;
  readonly migrations: number;
  readonly failedMigrations: number;
  /** Migrations refused as too big (then split, or marked jumbo). */
  readonly tooBigRefusals: number;
  readonly jumboChunks: number;
  readonly bytesMoved: number;
  readonly splits: number;
  readonly merges: number;
  readonly dataSizes: number;
  readonly initialChunks: number;
  readonly finalChunks: number;
  /** Bytes of the collection before and after: equal unless the simulation lost data. */
  readonly initialBytes: number;
  readonly finalBytes: number;
  readonly maxShardBytes: number;
  readonly minShardBytes: number;
  /** Per active shard at the end (draining shards are listed too). */
  readonly shards: Readonly<Record<ShardId, { readonly chunks: number; readonly bytes: number }>>;
  readonly status: CollectionBalanceStatus | undefined;
  readonly migrationsByReason: Readonly<Record<string, number>>;
}

const NAMESPACE = 'sim.coll';
const MIB = 1024 * 1024;

/** Runs `scenario` to convergence (or `maxRounds`) and returns the report. */
export function simulateBalancing(scenario: SimulationScenario): SimulationReport {
  return new Simulation(scenario).run();
}

/** Expands a scenario's chunk runs into concrete runs with sizes, drawing from `random`. */
export function expandChunkRuns(runs: readonly SimulatedChunkRun[], random: Random): ChunkRun[] {
  const out: ChunkRun[] = [];
  const size = (s: SimulatedSize): number => (typeof s === 'number' ? s : randomInt(random, s.min, s.max));
  for (const run of runs) {
    if ('shard' in run) {
      for (let i = 0; i < run.count; i++)
        out.push({
          shard: run.shard,
          chunks: 1,
          sizeBytes: size(run.sizeBytes),
          ...(run.unsplittable === true ? { unsplittable: true } : {}),
        });
      continue;
    }
    let left = run.count;
    let previous: ShardId | undefined;
    while (left > 0) {
      const others = run.shards.filter((s) => s !== previous);
      const shard = others[randomInt(random, 0, others.length - 1)] as ShardId;
      const length = Math.min(left, randomInt(random, run.runLength.min, run.runLength.max));
      for (let i = 0; i < length; i++) out.push({ shard, chunks: 1, sizeBytes: size(run.sizeBytes) });
      left -= length;
      previous = shard;
    }
  }
  return out;
}

class Simulation {
  private readonly random: Random;
  private chunks: SizedChunk[];
  private cv: ChunkVersion;
  private readonly shards: ShardStatistics[];
  private readonly zones: ZoneRange[];
  private nowMs = 0;
  /** When the last round's migrations ended (MongoDB's lastMigrationTime). */
  private lastMigrationMs: number | null = null;
  private tick = 0;
  private defrag: DefragmentationState | undefined;
  private chunkCountInProgress = false;
  private lastStatus: CollectionBalanceStatus | undefined;
  /** Chunks whose documents all share one key value: splitVector finds no split point. */
  private readonly unsplittable = new Set<string>();
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

  constructor(private readonly scenario: SimulationScenario) {
    this.random = createSeededRandom(scenario.seed);
    const runs = expandChunkRuns(scenario.chunks, this.random);
    this.chunks = layoutChunks(runs);
    runs.forEach((r, k) => {
      if (r.unsplittable === true) this.unsplittable.add(rangeKey((this.chunks[k] as SizedChunk).range));
    });
    this.cv = this.chunks.reduce((v, c) => maxChunkVersion(v, c.version), (this.chunks[0] as SizedChunk).version);
    this.shards = scenario.shards.map((s) => ({ id: s.id, state: s.draining === true ? 'draining' : 'active', zones: s.zones ?? [] }));
    this.zones = (scenario.zones ?? []).map((z) => ({ zone: z.zone, range: { min: layoutKey(z.from), max: layoutKey(z.to) } }));
    if (scenario.defragment === true) this.defrag = startDefragmentation(NAMESPACE);
  }

  run(): SimulationReport {
    const initialChunks = this.chunks.length;
    const initialBytes = this.totalBytes();
    const maxRounds = this.scenario.maxRounds ?? 20_000;
    let converged = false;
    for (let round = 0; round < maxRounds; round++) {
      const issued = this.runRound();
      if (!issued) {
        converged = true;
        break;
      }
      this.counters.rounds++;
    }
    const perShard: Record<ShardId, { chunks: number; bytes: number }> = {};
    for (const s of this.shards) perShard[s.id] = { chunks: 0, bytes: 0 };
    for (const c of this.chunks) {
      const entry = perShard[c.shard] ?? { chunks: 0, bytes: 0 };
      perShard[c.shard] = { chunks: entry.chunks + 1, bytes: entry.bytes + (c.estimatedSizeBytes ?? 0) };
    }
    const activeBytes = this.shards.filter((s) => s.state === 'active').map((s) => perShard[s.id]?.bytes ?? 0);
    return {
      scenario: this.scenario.name,
      seed: this.scenario.seed,
      converged,
      rounds: this.counters.rounds,
      simulatedMs: this.counters.lastActionMs,
      migrations: this.counters.migrations,
      failedMigrations: this.counters.failedMigrations,
      tooBigRefusals: this.counters.tooBigRefusals,
      jumboChunks: this.chunks.filter((c) => c.jumbo === true).length,
      bytesMoved: this.counters.bytesMoved,
      splits: this.counters.splits,
      merges: this.counters.merges,
      dataSizes: this.counters.dataSizes,
      initialChunks,
      finalChunks: this.chunks.length,
      initialBytes,
      finalBytes: this.totalBytes(),
      maxShardBytes: Math.max(...activeBytes),
      minShardBytes: Math.min(...activeBytes),
      shards: perShard,
      status: this.lastStatus,
      migrationsByReason: { ...this.byReason },
    };
  }

  /** One main-thread round and the secondary thread's work meanwhile. Returns whether anything was issued. */
  private runRound(): boolean {
    const roundStart = this.nowMs;
    // Splits at zone boundaries, awaited.
    const splits = selectZoneBoundarySplits(this.distribution());
    for (const split of splits) this.applySplit(split.range, split.splitPoints);
    // Migrations: defragmentation first, then the chunk selection policy on the shards left.
    const busy = new Set<ShardId>();
    let migrations: MigrationPlan[] = [];
    if (this.defrag !== undefined && this.defrag.phase !== 'finished') {
      const next = nextDefragmentationMigrations(this.defrag, this.defragSnapshot(), DEFAULT_DEFRAGMENTATION_SETTINGS, busy);
      this.defrag = next.state;
      migrations = next.migrations;
      for (const m of migrations) busy.add(m.from).add(m.to);
    }
    // A collection being defragmented is not balanced otherwise.
    if (this.defrag === undefined || this.defrag.phase === 'finished') {
      const settings = { ...DEFAULT_CHUNK_SELECTION_SETTINGS, mode: this.scenario.mode ?? 'dataSize' };
      const selection = selectMigrations(this.shards, [this.distribution()], settings, busy);
      this.lastStatus = selection.collections[0];
      this.chunkCountInProgress = selection.collections[0]?.chunkCountBalancingInProgress ?? false;
      migrations = [...selection.migrations];
    }
    // The migration throttle: what is left of it since the previous round's migrations ended.
    const throttling = this.scenario.migrationsThrottlingMs ?? BALANCER_MIGRATIONS_THROTTLING_MS;
    const migrationsStart = roundStart + (migrations.length > 0 ? migrationThrottleMs(throttling, this.lastMigrationMs, roundStart) : 0);
    let roundMs = 0;
    for (const m of migrations) roundMs = Math.max(roundMs, this.applyMigration(m, migrationsStart));
    const roundEnd = migrationsStart + roundMs;
    if (migrations.length > 0) this.lastMigrationMs = roundEnd;
    // After a round that issued migrations the next starts at once; else after the round interval.
    const interval = migrations.length > 0 ? 0 : BALANCER_ROUND_INTERVAL_MS;
    // The secondary thread works while the main thread sleeps and migrates.
    const secondaryIssued = this.runSecondary(roundStart, roundEnd - roundStart + interval);
    this.nowMs = roundEnd + interval;
    const issued = splits.length > 0 || migrations.length > 0 || secondaryIssued > 0;
    if (issued) this.counters.lastActionMs = Math.max(this.counters.lastActionMs, roundEnd);
    // A defragmentation that is not finished has something in flight or to do.
    return (
      issued ||
      (this.defrag !== undefined && this.defrag.phase !== 'finished' && this.defrag.inFlight.length + this.defrag.retries.length > 0)
    );
  }

  private runSecondary(start: number, windowMs: number): number {
    if (this.defrag === undefined || this.defrag.phase === 'finished') return 0;
    const throttle = DEFAULT_DEFRAGMENTATION_SETTINGS.defragmentationThrottlingMS;
    let issued = 0;
    for (let at = start; at < start + windowMs; at += throttle) {
      const next = nextDefragmentationActions(this.defrag, this.defragSnapshot(), DEFAULT_DEFRAGMENTATION_SETTINGS, 1);
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

  private applySecondary(action: DefragmentationAction, atMs: number): { ok: true; dataSizeBytes?: number } {
    switch (action.kind) {
      case 'dataSize': {
        this.counters.dataSizes++;
        const chunk = this.chunks.find((c) => rangesEqual(c.range, action.range));
        return { ok: true, dataSizeBytes: chunk?.estimatedSizeBytes ?? 0 };
      }
      case 'merge': {
        const parts = this.chunks.filter((c) => action.parts.some((p) => rangesEqual(p, c.range)));
        const merged: SizedChunk = {
          ...mergeChunks(parts, this.cv, this.clusterTime(atMs)),
          estimatedSizeBytes: parts.reduce((n, c) => n + (c.estimatedSizeBytes ?? 0), 0),
        };
        this.cv = maxChunkVersion(this.cv, merged.version);
        this.chunks = sortChunks([...this.chunks.filter((c) => !parts.includes(c)), merged]);
        this.counters.merges++;
        return { ok: true };
      }
      case 'migrate':
        return { ok: true };
    }
  }

  /** Executes a migration; returns its duration. A failure changes nothing. */
  private applyMigration(m: MigrationPlan, startMs: number): number {
    const index = this.chunks.findIndex((c) => rangesEqual(c.range, m.range));
    const chunk = this.chunks[index] as SizedChunk;
    const size = chunk.estimatedSizeBytes ?? 0;
    const rate = this.scenario.migrationBytesPerSecond ?? 64 * MIB;
    const jitter = 0.8 + 0.4 * this.random.nextFloat();
    const duration = Math.round(((this.scenario.migrationOverheadMs ?? 400) + (size / rate) * 1000) * jitter);
    if (isTooBigToMove(size, this.scenario.maxChunkSizeBytes)) {
      // The donor refuses after a short check; the main thread splits or marks jumbo.
      this.counters.tooBigRefusals++;
      const decision = decideOnChunkTooBig(this.splitVector(chunk));
      if (decision.action === 'split') this.applySplit(chunk.range, decision.splitPoints);
      else this.chunks[index] = { ...chunk, jumbo: true };
      return Math.round((this.scenario.migrationOverheadMs ?? 400) * jitter);
    }
    const failed = this.random.nextFloat() < (this.scenario.failureRate ?? 0);
    const defragAction: DefragmentationAction = { kind: 'migrate', namespace: NAMESPACE, shard: m.from, to: m.to, range: m.range };
    if (failed) {
      this.counters.failedMigrations++;
      if (m.reason === 'defragmentation' && this.defrag)
        this.defrag = onDefragmentationOutcome(this.defrag, defragAction, { ok: false, retryable: true, error: 'simulated failure' });
      return duration;
    }
    const control = this.chunks.find((c) => c !== chunk && c.shard === chunk.shard);
    const { moved, control: newControl } = moveChunk(chunk, m.to, this.cv, this.clusterTime(startMs + duration), control);
    this.chunks[index] = { ...moved, ...(chunk.estimatedSizeBytes === undefined ? {} : { estimatedSizeBytes: size }) };
    this.cv = maxChunkVersion(this.cv, moved.version);
    if (control && newControl) {
      this.chunks[this.chunks.indexOf(control)] = { ...control, version: newControl.version };
      this.cv = maxChunkVersion(this.cv, newControl.version);
    }
    this.counters.migrations++;
    this.counters.bytesMoved += size;
    this.byReason[m.reason] = (this.byReason[m.reason] ?? 0) + 1;
    if (m.reason === 'defragmentation' && this.defrag) this.defrag = onDefragmentationOutcome(this.defrag, defragAction, { ok: true });
    return duration;
  }

  /** The simulated shard's splitVector: the middle key of the chunk, none for an unsplittable one. */
  private splitVector(chunk: SizedChunk): SizedChunk['range']['min'][] {
    if (this.unsplittable.has(rangeKey(chunk.range))) return [];
    const lo = chunk.range.min[0];
    const hi = chunk.range.max[0];
    const low = typeof lo === 'number' ? lo : typeof hi === 'number' ? hi - 10 : 0;
    const high = typeof hi === 'number' ? hi : low + 10;
    const middle = Math.floor((low + high) / 2);
    return middle > low && middle < high ? [[middle]] : [];
  }

  private applySplit(range: SizedChunk['range'], points: readonly SizedChunk['range']['min'][]): void {
    const chunk = this.chunks.find((c) => rangesEqual(c.range, range)) as SizedChunk;
    const pieces = splitChunk(chunk, points, this.cv);
    // Pieces share the bytes evenly; the last takes the remainder so no byte is lost.
    const total = chunk.estimatedSizeBytes ?? 0;
    const share = Math.floor(total / pieces.length);
    for (const p of pieces) this.cv = maxChunkVersion(this.cv, p.version);
    const sized = pieces.map((p, k) => ({
      ...p,
      estimatedSizeBytes: k === pieces.length - 1 ? total - share * (pieces.length - 1) : share,
    }));
    this.chunks = sortChunks([...this.chunks.filter((c) => c !== chunk), ...sized]);
    this.counters.splits++;
  }

  private totalBytes(): number {
    return this.chunks.reduce((n, c) => n + (c.estimatedSizeBytes ?? 0), 0);
  }

  private distribution(): CollectionDistribution {
    const shardDataSizeBytes: Record<ShardId, number> = {};
    for (const c of this.chunks) shardDataSizeBytes[c.shard] = (shardDataSizeBytes[c.shard] ?? 0) + (c.estimatedSizeBytes ?? 0);
    return {
      namespace: NAMESPACE,
      chunks: this.chunks,
      zones: this.zones,
      maxChunkSizeBytes: this.scenario.maxChunkSizeBytes,
      shardDataSizeBytes,
      chunkCountBalancingInProgress: this.chunkCountInProgress,
    };
  }

  private defragSnapshot(): { chunks: readonly SizedChunk[]; maxChunkSizeBytes: number } {
    return { chunks: this.chunks, maxChunkSizeBytes: this.scenario.maxChunkSizeBytes };
  }

  private clusterTime(atMs: number): ClusterTimestamp {
    this.tick++;
    return { t: Math.floor(atMs / 1000) + 1, i: this.tick };
  }
}
