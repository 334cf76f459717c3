import { z } from 'zod';
import { BALANCER_SCHEDULERS, type BalancerScheduler, DEFAULT_BALANCER_SCHEDULER, DEFAULT_MAX_CHUNK_SIZE_BYTES } from '@tessera/core';
import { wireChunkRangeSchema } from './catalog-messages.js';
import { namespaceSchema, shardNameSchema } from './messages.js';

/** MongoDB's smallest configurable chunk size is 1 MiB; Tessera goes down to 64 KiB so that splits show on a laptop. */
export const MIN_CHUNK_SIZE_BYTES = 64 * 1024;
/** 1 TiB, as MongoDB's configureCollectionBalancing allows (1 to 1,048,576 MiB). */
export const MAX_CHUNK_SIZE_BYTES = 1024 * 1024 * 1024 * 1024;
/** MongoDB's default chunk size (libs/core's, which the balancer policies use). */
export const DEFAULT_CHUNK_SIZE_BYTES = DEFAULT_MAX_CHUNK_SIZE_BYTES;

const chunkSizeBytes = z.number().int().min(MIN_CHUNK_SIZE_BYTES, 'must be at least 64 KiB (65536)').max(MAX_CHUNK_SIZE_BYTES);
const clockTime = z.string().regex(/^([01]\d|2[0-3]):[0-5]\d$/, 'must be a 24-hour time HH:MM');

/** The balancer's settings (MongoDB's `balancer` document in config.settings). */
export interface BalancerSettings {
  /** `full` balances; `off` stops new rounds. */
  mode: 'full' | 'off';
  /** Migrations start only between these times of day (the config server's time zone); null: any time. */
  activeWindow: { start: string; stop: string } | null;
  /** Each migration waits for its range deletion before the next starts (MongoDB's `_waitForDelete`). */
  waitForDelete: boolean;
  /** `dataSize` (MongoDB 6+: imbalance by data size) or `chunkCount` (the legacy migration thresholds). */
  policy: 'dataSize' | 'chunkCount';
  attemptToBalanceJumboChunks: boolean;
  /**
   * `continuous` (default): a shard's next migration is planned as soon as its last one ends.
   * `rounds`: MongoDB's rounds, each waiting for all its migrations, then the migration throttle.
   */
  scheduler: BalancerScheduler;
  /**
   * Under `continuous`: how many migrations one donor serves at once, each to its own recipient;
   * 0 (default): as many as there are free recipients, within the load throttle's gate. The
   * `rounds` scheduler keeps MongoDB's one.
   */
  maxDonationsPerShard: number;
}

export interface ClusterSettings {
  balancer: BalancerSettings;
  /** The default max chunk size of collections that set none. */
  chunkSizeBytes: number;
  autoSplit: boolean;
}

export const DEFAULT_CLUSTER_SETTINGS: ClusterSettings = {
  balancer: {
    mode: 'full',
    activeWindow: null,
    waitForDelete: false,
    policy: 'dataSize',
    attemptToBalanceJumboChunks: false,
    scheduler: DEFAULT_BALANCER_SCHEDULER,
    maxDonationsPerShard: 0,
  },
  chunkSizeBytes: DEFAULT_CHUNK_SIZE_BYTES,
  autoSplit: true,
};

/** A partial update of the cluster settings: setBalancerState, setBalancingWindow, setChunkSize and the rest in one call. */
export const updateSettingsRequestSchema = z.strictObject({
  balancer: z
    .strictObject({
      mode: z.enum(['full', 'off']).optional(),
      activeWindow: z.strictObject({ start: clockTime, stop: clockTime }).nullable().optional(),
      waitForDelete: z.boolean().optional(),
      policy: z.enum(['dataSize', 'chunkCount']).optional(),
      attemptToBalanceJumboChunks: z.boolean().optional(),
      scheduler: z.enum(BALANCER_SCHEDULERS as [BalancerScheduler, ...BalancerScheduler[]]).optional(),
      maxDonationsPerShard: z.number().int().min(0).max(64).optional(),
    })
    .optional(),
  chunkSizeBytes: chunkSizeBytes.optional(),
  autoSplit: z.boolean().optional(),
});
export type UpdateSettingsRequest = z.input<typeof updateSettingsRequestSchema>;

/** MongoDB's configureCollectionBalancing; `chunkSizeBytes: null` goes back to the cluster default. */
export const configureCollectionBalancingRequestSchema = z.strictObject({
  ns: namespaceSchema,
  chunkSizeBytes: chunkSizeBytes.nullable().optional(),
  enableBalancing: z.boolean().optional(),
  enableAutoMerger: z.boolean().optional(),
  /** true starts defragmenting the collection (from its first phase), false stops it. */
  defragmentCollection: z.boolean().optional(),
});
export type ConfigureCollectionBalancingRequest = z.input<typeof configureCollectionBalancingRequestSchema>;

/**
 * A shard's request, right after it split off the top (or bottom) chunk of the key space, that
 * the balancer move that chunk off it (MongoDB's moveChunk from the ChunkSplitter).
 */
export const moveTopChunkRequestSchema = z.strictObject({
  ns: namespaceSchema,
  /** Exactly the chunk just split off. */
  range: wireChunkRangeSchema,
  /** The shard asking (the chunk's owner). */
  shard: shardNameSchema,
});
export type MoveTopChunkRequest = z.input<typeof moveTopChunkRequestSchema>;

/** `scheduled`: the balancer moves the chunk to `to` in the background; `skipped`: `why` it does not. */
export type MoveTopChunkResult = { outcome: 'scheduled'; to: string } | { outcome: 'skipped'; why: string };

/** One migration a balancer round issued, with why (`drain`, `zoneViolation`, `imbalance`, `defragmentation`). */
export interface BalancerRoundMigration {
  ns: string;
  from: string;
  to: string;
  /** The chunk's min and max as shard-key documents in Extended JSON. */
  min: Record<string, unknown>;
  max: Record<string, unknown>;
  reason: string;
  outcome: 'moved' | 'failed' | 'skipped';
}

/**
 * A router's foreground writes over its last report window (the continuous scheduler's throttle
 * reads them): how many completed and their p99, null with none.
 */
export const foregroundLoadReportSchema = z.strictObject({
  router: z.string().min(1).max(200),
  windowMs: z.number().int().min(1).max(600_000),
  writes: z.number().int().min(0),
  p99Ms: z.number().min(0).nullable(),
  /** Writes still running at the window's end: with none completed, the writes are stalled, not idle. */
  inFlight: z.number().int().min(0),
});
export type ForegroundLoadReport = z.input<typeof foregroundLoadReportSchema>;

/** The continuous scheduler's throttle, in `balancerStatus`. */
export interface BalancerThrottleStatus {
  /**
   * `fullSpeed`, or `throttled` with `reason`: migrations go one at a time, `pauseMs` apart, or
   * clone at `cloneShare` of their speed.
   */
  state: 'fullSpeed' | 'throttled';
  reason: string | null;
  pauseMs: number;
  /** The share of its speed a clone runs at (1: full speed); it halves over the target and grows by a tenth per window under. */
  cloneShare: number;
  /** The routers' write p99 while no migration ran (medians of recent windows), and with migrations running. */
  idleWriteP99Ms: number | null;
  migratingWriteP99Ms: number | null;
  targetLatencyMultiple: number;
  /** 0: no limit. */
  maxBytesPerSecond: number;
  /** Bytes the balancer's migrations moved per second over the last 10 s. */
  currentBytesPerSecond: number;
  migrationsInFlight: number;
  /** The most migrations at once while writes run (grows by one per window within the target); null: no limit. */
  concurrencyLimit: number | null;
}

/** `balancerStatus` (MongoDB's balancerStatus): the mode, whether a round runs, and the last round. */
export interface BalancerStatus {
  mode: 'full' | 'off';
  inBalancerRound: boolean;
  throttle: BalancerThrottleStatus;
  lastRound: {
    startedAt: string;
    durationMs: number;
    /** MongoDB's balancer.round times: snapshot and selection (zone splits included), the migration throttle's sleep, the migrations. */
    selectionTimeMillis: number;
    throttleTimeMillis: number;
    migrationTimeMillis: number;
    migrations: BalancerRoundMigration[];
    errors: Array<{ ns?: string; code: string; message: string }>;
  } | null;
}

/** `balancerCollectionStatus(ns)`. */
export interface BalancerCollectionStatus {
  balancerCompliant: boolean;
  firstComplianceViolation?: 'draining' | 'zoneViolation' | 'chunksImbalance' | 'defragmentingChunks';
}
