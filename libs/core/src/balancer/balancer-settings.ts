/**
 * The balancer's settings with MongoDB's names and defaults. Plain data; the config server
 * reads them from its settings collection and hands them to the policies.
 */

/**
 * How the chunk selection policy measures imbalance:
 * - `dataSize`: MongoDB 6.0+ (balancer-internals.md): bytes per shard, imbalanced when the most
 *   and least loaded shards differ by more than 3 × the max chunk size.
 * - `chunkCountOptimal`: balancer-manual.rst: chunks per shard, imbalanced when the most loaded
 *   shard holds more than 1 chunk above the optimal count (total ÷ shards, rounded up).
 * - `chunkCountThreshold`: sharded-cluster-internals-manual.rst (MongoDB 2.2): imbalanced when
 *   the most and least loaded shards differ by at least the threshold of the 2/4/8 table; once
 *   started, balancing goes on until they differ by less than 2.
 */
export type BalancingMode = 'dataSize' | 'chunkCountOptimal' | 'chunkCountThreshold';

/** All balancing modes, for validation at the edge. */
export const BALANCING_MODES: readonly BalancingMode[] = ['dataSize', 'chunkCountOptimal', 'chunkCountThreshold'];

/** Settings of the chunk selection policy. */
export interface ChunkSelectionSettings {
  readonly mode: BalancingMode;
  /**
   * In `dataSize` mode the imbalance threshold is this many max chunk sizes (MongoDB: 3, the
   * "3 times the max chunk size" of balancer-internals.md).
   */
  readonly imbalanceThresholdChunks: number;
  /**
   * How many migrations one donor may serve at once, each to its own recipient (see
   * `MigrationSlots`). MongoDB: 1, the default; `Infinity`: as many as there are free recipients.
   */
  readonly maxDonationsPerShard?: number;
}

/** MongoDB's defaults: balance on data size, threshold 3 × max chunk size. */
export const DEFAULT_CHUNK_SELECTION_SETTINGS: ChunkSelectionSettings = Object.freeze({ mode: 'dataSize', imbalanceThresholdChunks: 3 });

/** The default max chunk size, `chunkSize` in `config.settings`: 128 MiB (MongoDB 6.0+). */
export const DEFAULT_MAX_CHUNK_SIZE_BYTES = 128 * 1024 * 1024;

/** Settings of the auto-merger (sharding_config_server_parameters.idl and server parameters). */
export interface AutoMergerSettings {
  /** History kept for snapshot reads; a chunk moved more recently than this is not mergeable. Default 300. */
  readonly minSnapshotHistoryWindowInSeconds: number;
  /** A transaction's lifetime; a chunk moved more recently than this is not mergeable. Default 60. */
  readonly transactionLifetimeLimitSeconds: number;
  /** Delay between two scans for mergeable chunks. Default 3,600 (1 hour). */
  readonly autoMergerIntervalSecs: number;
  /** Least delay between two auto-merge actions on one collection. Default 15,000 ms. */
  readonly autoMergerThrottlingMS: number;
  /** At most this many `mergeAllChunksOnShard` actions are outstanding at a time. Default 10. */
  readonly maxActionsInFlight: number;
}

/** MongoDB's defaults for the auto-merger. */
export const DEFAULT_AUTO_MERGER_SETTINGS: AutoMergerSettings = Object.freeze({
  minSnapshotHistoryWindowInSeconds: 300,
  transactionLifetimeLimitSeconds: 60,
  autoMergerIntervalSecs: 3600,
  autoMergerThrottlingMS: 15_000,
  maxActionsInFlight: 10,
});

/** Settings of defragmentation and of the balancer's secondary thread. */
export interface DefragmentationSettings {
  /** A chunk below this fraction of the max chunk size is "small" in phase 2. MongoDB: 25%. */
  readonly smallChunkFraction: number;
  /** Least delay between two defragmentation actions (`defragmentationThrottlingMS`). Default 1,000 ms. */
  readonly defragmentationThrottlingMS: number;
  /** Outstanding operations of the secondary thread. MongoDB: 50. */
  readonly maxActionsInFlight: number;
}

/** MongoDB's defaults for defragmentation. */
export const DEFAULT_DEFRAGMENTATION_SETTINGS: DefragmentationSettings = Object.freeze({
  smallChunkFraction: 0.25,
  defragmentationThrottlingMS: 1000,
  maxActionsInFlight: 50,
});

/** The main thread's delay after a round with no migration to issue (MongoDB's kBalanceRoundDefaultInterval, 10 s). */
export const BALANCER_ROUND_INTERVAL_MS = 10_000;

/**
 * MongoDB's balancerMigrationsThrottlingMs: the least time between the end of a round's migrations
 * and the start of the next round's. A round that issued migrations is followed by the next at
 * once; that round sleeps what is left of this before its migrations (its selection counts).
 */
export const BALANCER_MIGRATIONS_THROTTLING_MS = 1000;

/**
 * When the balancer's main loop plans migrations:
 * - `rounds`: MongoDB's. A round plans migrations for every free shard, issues them, waits for
 *   all of them, then sleeps what is left of `balancerMigrationsThrottlingMs` before the next
 *   round's migrations.
 * - `continuous`: as soon as a migration ends, the leader plans again with the same policies, so
 *   the shards it freed start their next migration without waiting for the round's others (as
 *   CockroachDB and TiDB schedule moves).
 */
export type BalancerScheduler = 'rounds' | 'continuous';

/** All schedulers, for validation at the edge. */
export const BALANCER_SCHEDULERS: readonly BalancerScheduler[] = ['rounds', 'continuous'];

/** The default scheduler. */
export const DEFAULT_BALANCER_SCHEDULER: BalancerScheduler = 'continuous';
