/**
 * The simulator's inputs and output: a scenario, as the JSON files under `tools/sim/scenarios/`
 * hold it, and the report of a run.
 */
import type { ShardId } from '../routing/chunk.js';
import type { BalancerScheduler, BalancingMode } from './balancer-settings.js';
import type { ChunkRun } from './chunk-layout.js';
import type { CollectionBalanceStatus } from './chunk-selection.policy.js';
import type { MigrationPlan, SizedChunk } from './distribution.js';
import type { MigrationUnderWay } from './migration-slots.js';
import type { Random } from './seeded-random.js';
import { randomInt } from './seeded-random.js';

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
  /**
   * When the main thread plans; default `rounds` (not the service's `DEFAULT_BALANCER_SCHEDULER`),
   * so a scenario file means what it meant before the continuous scheduler existed.
   */
  readonly scheduler?: BalancerScheduler;
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
  /**
   * How many migrations a donor serves at once (`balancer.maxDonationsPerShard`); 0: as many as
   * there are free recipients. Default 1, MongoDB's. Each runs at `migrationBytesPerSecond`: the
   * recipient's writes, not the donor's reads, bound a clone.
   */
  readonly maxDonationsPerShard?: number;
  /** balancerMigrationsThrottlingMs, `rounds` only; default `BALANCER_MIGRATIONS_THROTTLING_MS` (1,000). */
  readonly migrationsThrottlingMs?: number;
  /** Probability that a migration fails (retryably); default 0. */
  readonly failureRate?: number;
  /** Give up after this many rounds (`continuous`: planning events); default 20,000. */
  readonly maxRounds?: number;
}

/** What a simulation found. */
export interface SimulationReport {
  readonly scenario: string;
  readonly seed: number;
  readonly scheduler: BalancerScheduler;
  /** True when the policies had nothing left to do before `maxRounds`. */
  readonly converged: boolean;
  /**
   * `rounds`: main-thread rounds that issued something (the secondary thread's work counts).
   * `continuous`: planning events that issued a split or a migration.
   */
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

/** One migration as the simulator ran it: issued at `startMs`, its outcome applied at `endMs`. */
export interface SimulatedMigration {
  readonly plan: MigrationPlan;
  readonly startMs: number;
  readonly endMs: number;
  readonly ok: boolean;
}

/** One planning of the main thread: the chunks the policy read, the migrations under way, what it issued. */
export interface SimulatedPlanning {
  readonly nowMs: number;
  readonly underWay: readonly MigrationUnderWay[];
  readonly chunks: readonly SizedChunk[];
  readonly migrations: readonly MigrationPlan[];
}

/** Watches a simulation without changing it (tests look at the schedule through it). */
export interface SimulationObserver {
  readonly planned?: (planning: SimulatedPlanning) => void;
  readonly migrationEnded?: (migration: SimulatedMigration) => void;
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
