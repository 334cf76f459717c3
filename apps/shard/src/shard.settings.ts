import { z } from 'zod';
import { commonSettingsShape, databaseSettingsShape, logicalSessionSettingsShape, millisecondsSetting } from '@tessera/platform';

/** A shard's settings; docs/configuration.md documents each with its default. */
export const shardSettingsSchema = z.object({
  ...commonSettingsShape(7101),
  ...databaseSettingsShape,
  /** MongoDB's orphanCleanupDelaySecs: how long a donor keeps a moved range before deleting it. */
  TESSERA_ORPHAN_CLEANUP_DELAY_SECS: z.coerce.number().int().min(0).max(31_536_000).default(900),
  /** MongoDB's rangeDeleterBatchSize: documents deleted per batch by the range deleter. */
  TESSERA_RANGE_DELETER_BATCH_SIZE: z.coerce.number().int().min(1).max(1_000_000).default(128),
  /** MongoDB's rangeDeleterBatchDelayMS: the pause between two range deletion batches. */
  TESSERA_RANGE_DELETER_BATCH_DELAY_MS: z.coerce.number().int().min(0).max(3_600_000).default(20),
  /** The longest a donor holds a migration's critical section before it aborts the migration. */
  TESSERA_MIGRATION_CRITICAL_SECTION_TIMEOUT_MS: millisecondsSetting(10_000),
  /**
   * How many migrations this shard donates at once, each of its own range to its own recipient
   * (MongoDB: one). The balancer's `maxDonationsPerShard` chooses how many it asks for.
   */
  TESSERA_MIGRATION_MAX_DONATIONS: z.coerce.number().int().min(1).max(64).default(8),
  /** Documents per batch a recipient clones from a donor. */
  TESSERA_MIGRATION_CLONE_BATCH_DOCUMENTS: z.coerce.number().int().min(1).max(100_000).default(20_000),
  /**
   * MongoDB's minSnapshotHistoryWindowInSeconds: how far back snapshot reads (`atClusterTime`)
   * may go; replaced and deleted documents are kept that long. 0 keeps no history.
   */
  TESSERA_MIN_SNAPSHOT_HISTORY_WINDOW_SECS: z.coerce.number().int().min(0).max(86_400).default(300),
  /** MongoDB's transactionLifetimeLimitSeconds: a transaction not committing by then is aborted by the reaper. */
  TESSERA_TRANSACTION_LIFETIME_LIMIT_SECS: z.coerce.number().int().min(0).max(86_400).default(60),
  /**
   * MongoDB's maxTransactionLockRequestTimeoutMillis: how long a transaction's statement waits for
   * a lock another transaction holds before wait-die judges it; the younger side then fails with
   * LockTimeout (TransientTransactionError). Judging costs a query, hence not MongoDB's 5 ms.
   */
  TESSERA_MAX_TRANSACTION_LOCK_REQUEST_TIMEOUT_MS: z.coerce.number().int().min(1).max(60_000).default(100),
  /** Wait-die: the longest an older transaction's statement waits for a younger one's lock. */
  TESSERA_TRANSACTION_OLDER_WAIT_MS: millisecondsSetting(1_000),
  /** Connections for open transactions (each holds one until it prepares or ends), apart from the shard's pool. */
  TESSERA_TRANSACTION_POOL_SIZE: z.coerce.number().int().min(1).max(200).default(32),
  /** How long a prepared transaction waits for its decision before it asks its coordinator. */
  TESSERA_TRANSACTION_RESOLVE_AFTER_MS: millisecondsSetting(1_000),
  /**
   * This shard's database as its peers reach it, handed to them in two-phase commit so that they
   * can resolve its transactions while its process is down; empty means TESSERA_DATABASE_URL,
   * `off` hands nothing out (its transactions then wait for its restart).
   */
  TESSERA_DATABASE_URL_FOR_PEERS: z.string().default(''),
  ...logicalSessionSettingsShape,
});

export type ShardSettings = z.output<typeof shardSettingsSchema>;
