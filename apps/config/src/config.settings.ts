import { z } from 'zod';
import { configSeedListSchema } from '@tessera/protocol';
import { commonSettingsShape, databaseSettingsShape, millisecondsSetting } from '@tessera/platform';

const nonNegativeInteger = (fallback: number) => z.coerce.number().int().min(0).max(2_147_483_647).default(fallback);

const controlPlaneToken = z.string().min(16, 'must be at least 16 characters').max(512).optional();

/** The config server's settings; docs/configuration.md documents each with its default. */
export const configSettingsSchema = z.object({
  ...commonSettingsShape(7080),
  ...databaseSettingsShape,
  /** How often the config server checks that each shard answers. */
  TESSERA_SHARD_MONITOR_INTERVAL_MS: millisecondsSetting(5_000),
  /** How often this process renews its config.lockpings row. */
  TESSERA_LOCK_PING_INTERVAL_MS: millisecondsSetting(5_000),
  /** A lock whose process has not pinged for this long may be taken over. */
  TESSERA_LOCK_TAKEOVER_MS: millisecondsSetting(30_000),
  /** How long a DDL waits for a busy lock before answering LOCK_BUSY. */
  TESSERA_LOCK_WAIT_MS: millisecondsSetting(20_000),
  /** The leader lease: a leader that has not renewed for this long is replaced. */
  TESSERA_LEADER_LEASE_MS: millisecondsSetting(10_000),
  /**
   * Every config process of the cluster, this one included, comma-separated: what addShard gives
   * each shard to reach the config servers by (any of them answers). Unset: this process alone.
   */
  TESSERA_CONFIG_URLS: configSeedListSchema.optional(),
  /** How often the leader renews its lease and followers try to take an expired one. */
  TESSERA_LEADER_RENEW_INTERVAL_MS: millisecondsSetting(1_000),
  /** The changelog keeps its newest rows, this many (MongoDB keeps config.changelog a capped collection). */
  TESSERA_CHANGELOG_MAX_ROWS: z.coerce.number().int().min(1).max(2_147_483_647).default(200_000),
  /** The audit log keeps its entries this many days; the leader deletes older ones hourly (0: kept forever). */
  TESSERA_AUDIT_RETENTION_DAYS: z.coerce.number().int().min(0).max(36_500).default(90),
  /** How often the leader deletes the changelog rows beyond TESSERA_CHANGELOG_MAX_ROWS. */
  TESSERA_CHANGELOG_PRUNE_INTERVAL_MS: millisecondsSetting(60_000),
  /** The balancer's delay between rounds on the leader (MongoDB: 10 s). */
  TESSERA_BALANCER_ROUND_INTERVAL_MS: millisecondsSetting(10_000),
  /** MongoDB's balancerMigrationsThrottlingMs: least time between the migrations of two rounds (1 s; 0: none). */
  TESSERA_BALANCER_MIGRATIONS_THROTTLING_MS: nonNegativeInteger(1_000),
  /**
   * The continuous scheduler's throttle (libs/core load-throttle.ts): migrations slow down while
   * the routers' write p99 is over this multiple of its idle value (2; 0: never on latency).
   */
  TESSERA_BALANCER_TARGET_LATENCY_MULTIPLE: z.coerce.number().min(0).max(1_000).default(2),
  /** The continuous scheduler's byte rate: all migrations together move at most this many bytes a second (0: no limit). */
  TESSERA_BALANCER_MAX_BYTES_PER_SEC: z.coerce.number().int().min(0).max(Number.MAX_SAFE_INTEGER).default(0),
  /**
   * A round's snapshot reads each collection's bytes from its shards (statsForBalancing) at most
   * this often; in between, the last read moved by the balancer's own migrations (0: every round).
   */
  TESSERA_BALANCER_STATS_REFRESH_MS: z.coerce.number().int().min(0).max(3_600_000).default(10_000),
  /** How often the balancer's leader reads the routers' foreground load reports. */
  TESSERA_BALANCER_LOAD_POLL_MS: millisecondsSetting(1_000),
  /** How often the leader looks for migration records that no shard runs (see MigrationRecordsService). */
  TESSERA_MIGRATION_RECONCILE_INTERVAL_MS: millisecondsSetting(10_000),
  /** A migration record is checked against its shards only once this old: its donor may not have been called yet. */
  TESSERA_MIGRATION_RECORD_GRACE_MS: millisecondsSetting(10_000),
  /** MongoDB's autoMergerIntervalSecs: delay between two auto-merger scans (1 hour). */
  TESSERA_AUTO_MERGER_INTERVAL_SECS: nonNegativeInteger(3_600),
  /** MongoDB's autoMergerThrottlingMS: least delay between two batches of auto-merge actions (15 s). */
  TESSERA_AUTO_MERGER_THROTTLING_MS: nonNegativeInteger(15_000),
  /** MongoDB's defragmentationThrottlingMS: least delay between two defragmentation actions (1 s). */
  TESSERA_DEFRAGMENTATION_THROTTLING_MS: nonNegativeInteger(1_000),
  /** MongoDB's minSnapshotHistoryWindowInSeconds: a chunk migrated more recently is not auto-merged (300). */
  TESSERA_MIN_SNAPSHOT_HISTORY_WINDOW_SECS: nonNegativeInteger(300),
  /** MongoDB's transactionLifetimeLimitSeconds, as the auto-merger reads it: a chunk migrated more recently is not auto-merged (60). */
  TESSERA_TRANSACTION_LIFETIME_LIMIT_SECS: nonNegativeInteger(60),
  /**
   * MongoDB's localLogicalSessionTimeoutMinutes: a session unused for this long expires (30). A
   * number of minutes that may have decimals (MongoDB's is whole), so that tests can expire
   * sessions in about a second (0.02) with the same one setting.
   */
  TESSERA_LOCAL_LOGICAL_SESSION_TIMEOUT_MINUTES: z.coerce.number().positive().max(525_600).default(30),
  /**
   * MongoDB's KeysRotationIntervalSec: each HMAC key signs ClusterTime for this long (90 days),
   * the next one is generated a whole interval ahead, and a key still verifies for one interval
   * after it stopped signing, so nothing signed in flight fails across a rotation.
   */
  TESSERA_KEYS_ROTATION_INTERVAL_SECS: z.coerce.number().int().min(1).max(2_147_483_647).default(7_776_000),
  /** MongoDB's logicalSessionRefreshMillis, as the config server reads it: how often the leader expires sessions (5 min). */
  TESSERA_LOGICAL_SESSION_REFRESH_MILLIS: millisecondsSetting(300_000),
  /** The control plane's admin token: GraphQL mutations need it (it also grants what the viewer token does). Unset: no mutations. */
  TESSERA_ADMIN_TOKEN: controlPlaneToken,
  /** The control plane's viewer token: GraphQL queries and subscriptions, socket.io /events. Unset: only the admin token reads. */
  TESSERA_VIEWER_TOKEN: controlPlaneToken,
  /**
   * The `root` user's API key (root role), kept in step with this setting at every start: the
   * key docker-compose takes from its environment and `npm start` from the data directory.
   */
  TESSERA_ROOT_KEY: z.string().min(32, 'must be at least 32 characters').max(512).optional(),
  /** Development mode of the control plane: introspection on and GraphiQL at /graphiql (from local assets). */
  TESSERA_GRAPHQL_DEVELOPMENT: z.stringbool().default(false),
  /** The dashboard's built files, served at `/`; default: dist/dashboard of this build. */
  TESSERA_DASHBOARD_DIR: z.string().min(1).optional(),
  /** GraphQL operations nested deeper than this are refused before they run. */
  TESSERA_GRAPHQL_MAX_DEPTH: z.coerce.number().int().min(2).max(100).default(10),
  /** GraphQL operations whose estimated cost (fields weighted by depth) exceeds this are refused. */
  TESSERA_GRAPHQL_MAX_COST: z.coerce.number().int().min(100).max(1_000_000).default(20_000),
});

export type ConfigSettings = z.output<typeof configSettingsSchema>;
