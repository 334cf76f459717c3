import { z } from 'zod';
import { commonSettingsShape, logicalSessionSettingsShape, millisecondsSetting } from '@tessera/platform';
import { configSeedListSchema } from '@tessera/protocol';

/** A router's settings; docs/configuration.md documents each with its default. */
export const routerSettingsSchema = z.object({
  ...commonSettingsShape(7070),
  /** The config processes: one URL, or several separated by commas (any of them answers). */
  TESSERA_CONFIG_URL: z
    .string({ error: 'is required: the config server URL (or several, comma-separated), e.g. http://127.0.0.1:7080' })
    .pipe(configSeedListSchema),
  /**
   * MongoDB's mongosShutdownTimeoutMillisForSignaledShutdown: on SIGTERM the router quiesces this
   * long (it serves on, while `hello` answers ShutdownInProgress so clients move) before it stops.
   */
  TESSERA_QUIESCE_MS: z.coerce.number().int().min(0).max(600_000).default(15_000),
  /**
   * MongoDB's security.authorization: `enabled`, every public route but hello and the API's
   * description needs a user (API key or password) with the privileges its access rule names.
   * Enabled by default: a router that answers anyone who reaches its port is an open database.
   */
  TESSERA_AUTHORIZATION: z.enum(['enabled', 'disabled']).default('enabled'),
  /**
   * Public API requests a second each API key (or user, or address without authorization) may
   * send to this router; past it, 429 with Retry-After. 0: no limit.
   */
  TESSERA_RATE_LIMIT_PER_SECOND: z.coerce.number().int().min(0).max(10_000_000).default(0),
  /** MongoDB's userCacheInvalidationIntervalSecs: how often the router asks whether users, roles or keys changed. */
  TESSERA_USER_CACHE_INVALIDATION_INTERVAL_SECS: z.coerce.number().int().min(1).max(86_400).default(30),
  /** How often the router renews its registration (MongoDB's mongos pings every 30 s). */
  TESSERA_ROUTER_PING_INTERVAL_MS: millisecondsSetting(30_000),
  /**
   * How often the router reports its foreground writes (count and p99) to the config server,
   * whose balancer paces migrations by them (0: never).
   */
  TESSERA_ROUTER_LOAD_REPORT_INTERVAL_MS: z.coerce.number().int().min(0).max(600_000).default(1_000),
  /**
   * MongoDB's maxAcceptableLogicalClockDriftSecs: a client's $clusterTime further ahead of this
   * node's wall clock is refused (ClusterTimeFailsRateLimiter). MongoDB's default is a year;
   * 60 s suits clocks kept in sync.
   */
  TESSERA_MAX_ACCEPTABLE_LOGICAL_CLOCK_DRIFT_SECS: z.coerce.number().int().min(1).max(31_536_000).default(60),
  /** MongoDB's slowms: an operation that took this long or longer is logged, with its comment. */
  TESSERA_SLOW_OP_MS: z.coerce.number().int().min(0).max(3_600_000).default(100),
  ...logicalSessionSettingsShape,
});

export type RouterSettings = z.output<typeof routerSettingsSchema>;
