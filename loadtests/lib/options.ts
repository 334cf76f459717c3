// Workload options from environment variables (k6's `__ENV`, or the Node process environment). Every
// problem is collected and reported at once, naming the variable, what was expected and what was
// given, so a mistyped run fails before it sends a request.

export type WorkloadName =
  | 'insert-monotonic'
  | 'insert-hashed'
  | 'insert-random'
  | 'crud-mix'
  | 'add-shard-under-load'
  | 'subscriptions'
  | 'retryable-writes'
  | 'transactions'
  | 'router-roll';

export const WORKLOADS: readonly WorkloadName[] = [
  'insert-monotonic',
  'insert-hashed',
  'insert-random',
  'crud-mix',
  'add-shard-under-load',
  'subscriptions',
  'retryable-writes',
  'transactions',
  'router-roll',
];

export interface WorkloadOptions {
  workload: WorkloadName;
  /** The router's base URL (REST API under /v1). */
  routerUrl: string;
  /**
   * Every router the load may use (ROUTER_URLS), ROUTER_URL alone by default; retryable-writes
   * retries through another one, router-roll keeps them all in its pool.
   */
  routerUrls: string[];
  /** A config server's base URL (GraphQL at /graphql, graphql-ws at ws://.../graphql). */
  configUrl: string;
  /** The control plane's admin token: setup and teardown need mutations and queries. */
  adminToken: string;
  /**
   * The API key sent to the routers (`Authorization: Bearer`): a user with readWrite on NS's
   * database, such as root. Empty: none, for routers with TESSERA_AUTHORIZATION=disabled.
   */
  apiKey: string;
  /** Token for the websocket subscribers (the viewer token is enough); the admin token when unset. */
  viewerToken: string;
  vus: number;
  /** As k6 writes it ("60s", "2m", "1m30s"). */
  duration: string;
  durationMs: number;
  /** The collection's max chunk size (configureCollectionBalancing), 64 KiB at least. */
  chunkSizeBytes: number;
  /** Size of each inserted document as JSON, padding included. */
  docBytes: number;
  /** Documents per insert request. */
  batch: number;
  /** Namespace the workload creates (dropped and re-created by setup). */
  ns: string;
  /** The p99 latency bound of the thresholds, in milliseconds. */
  p99Ms: number;
  /** The error-rate bound of the thresholds (0.001 = 0.1%); add-shard-under-load uses 0. */
  maxErrorRate: number;
  /** How long teardown waits for the balancer to settle (compliant, or the new shard holding data). */
  settleMs: number;
  /** Where handleSummary writes the JSON summary. */
  summaryPath: string;
  /** crud-mix: documents loaded by setup, the keys that reads and updates target. */
  seedDocs: number;
  /** subscriptions: websocket clients. */
  subscribers: number;
  /** add-shard-under-load: the shard to add, and when (ms after the start). */
  newShardName: string;
  newShardUrl: string;
  addShardAfterMs: number;
  /** retryable-writes: the share of writes sent a second time, from 0 to 1. */
  retryRate: number;
  /** transactions: the accounts setup creates, `_id` 0 to accounts - 1. */
  accounts: number;
  /** transactions: each account's balance at the start; the total must stay accounts × openingBalance. */
  openingBalance: number;
  /** transactions: how many times a transfer's transaction runs again after a TransientTransactionError before the transfer is given up. */
  maxTxnRetries: number;
  /** router-roll: how often each VU asks every usable router's `hello`, in the VU's own time. */
  helloIntervalMs: number;
  /** router-roll: a write that meets a router going away is sent once more through the next router, as a driver's retryWrites. */
  retryWrites: boolean;
}

export type Env = Readonly<Record<string, string | undefined>>;

/** Defaults that suit a laptop-sized local cluster (`npm start`) and the 2-core CI machine. */
export const DEFAULTS = {
  ROUTER_URL: 'http://127.0.0.1:7070',
  CONFIG_URL: 'http://127.0.0.1:7080',
  VUS: 8,
  DURATION: '60s',
  CHUNK_SIZE: 64 * 1024,
  DOC_BYTES: 1024,
  BATCH: 10,
  P99_MS: 1000,
  SETTLE: '60s',
  SEED_DOCS: 2000,
  SUBSCRIBERS: 20,
  NEW_SHARD_NAME: 'shard3',
  NEW_SHARD_URL: 'http://127.0.0.1:7104',
  RETRY_RATE: 0.2,
  ACCOUNTS: 100,
  OPENING_BALANCE: 100,
  MAX_TXN_RETRIES: 5,
  HELLO_INTERVAL: '200ms',
  RETRY_WRITES: true,
} as const;

export const MIN_CHUNK_SIZE = 64 * 1024;
/** The smallest document the builder can make: the key fields and an empty pad. */
export const MIN_DOC_BYTES = 128;

export class OptionsError extends Error {
  constructor(readonly problems: string[]) {
    super(`bad load test options:\n${problems.map((p) => `  ${p}`).join('\n')}`);
    this.name = 'OptionsError';
  }
}

/** "90s", "2m", "1m30s", "500ms", "1h" (k6's duration syntax) in milliseconds; undefined when malformed. */
export function parseDuration(text: string): number | undefined {
  const trimmed = text.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Number(trimmed) * 1000;
  const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  let total = 0;
  let rest = trimmed;
  if (rest === '') return undefined;
  while (rest !== '') {
    const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)/.exec(rest);
    if (match === null) return undefined;
    total += Number(match[1]) * (units[match[2] as string] as number);
    rest = rest.slice(match[0].length);
  }
  return total;
}

/** "65536", "64KiB", "64KB", "1MiB", "1MB" in bytes (KB and KiB both mean 1024); undefined when malformed. */
export function parseBytes(text: string): number | undefined {
  const match = /^(\d+(?:\.\d+)?)\s*(b|kb|kib|k|mb|mib|m|gb|gib|g)?$/i.exec(text.trim());
  if (match === null) return undefined;
  const unit = (match[2] ?? 'b').toLowerCase();
  const factor = unit.startsWith('k') ? 1024 : unit.startsWith('m') ? 1024 ** 2 : unit.startsWith('g') ? 1024 ** 3 : 1;
  return Math.round(Number(match[1]) * factor);
}

/** The namespace a workload uses unless NS says otherwise: `load.insert_random`, ... */
export function defaultNamespace(workload: WorkloadName): string {
  return `load.${workload.replaceAll('-', '_')}`;
}

/**
 * Reads and validates the options of `workload` from `env`. Throws `OptionsError` listing every
 * problem; never returns half-parsed options. Long because it is the table of every option with
 * its default and bounds, read once top to bottom.
 */
export function parseWorkloadOptions(workload: WorkloadName, env: Env): WorkloadOptions {
  const problems: string[] = [];
  const text = (name: string, fallback: string): string => {
    const value = env[name];
    return value === undefined || value === '' ? fallback : value;
  };
  const url = (name: string, fallback: string): string => {
    const value = text(name, fallback).replace(/\/+$/, '');
    if (!/^https?:\/\/[^/\s]+/.test(value)) problems.push(`${name} must be an http:// or https:// URL, got "${value}"`);
    return value;
  };
  const integer = (name: string, fallback: number, min: number, max: number): number => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min || n > max) {
      problems.push(`${name} must be a whole number from ${min} to ${max}, got "${raw}"`);
      return fallback;
    }
    return n;
  };
  const bytes = (name: string, fallback: number, min: number): number => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    const n = parseBytes(raw);
    if (n === undefined || n < min) {
      problems.push(`${name} must be a size of at least ${min} bytes ("65536", "64KiB", "1MiB"), got "${raw}"`);
      return fallback;
    }
    return n;
  };
  const duration = (name: string, fallback: string): [string, number] => {
    const raw = text(name, fallback);
    const ms = parseDuration(raw);
    if (ms === undefined || ms <= 0) {
      problems.push(`${name} must be a duration such as "30s", "2m" or "1m30s", got "${raw}"`);
      return [fallback, parseDuration(fallback) ?? 0];
    }
    return [raw, ms];
  };

  const routerUrl = url('ROUTER_URL', DEFAULTS.ROUTER_URL);
  const routerUrlsText = text('ROUTER_URLS', '');
  const routerUrls =
    routerUrlsText === ''
      ? [routerUrl]
      : routerUrlsText
          .split(',')
          .map((u) => u.trim().replace(/\/+$/, ''))
          .filter((u) => u !== '');
  for (const u of routerUrls)
    if (!/^https?:\/\/[^/\s]+/.test(u)) problems.push(`ROUTER_URLS must be a comma-separated list of http:// or https:// URLs, got "${u}"`);
  const retryRateText = text('RETRY_RATE', String(DEFAULTS.RETRY_RATE));
  let retryRate: number = DEFAULTS.RETRY_RATE;
  if (!/^\d*\.?\d+$/.test(retryRateText.trim()) || Number(retryRateText) > 1)
    problems.push(`RETRY_RATE must be a share from 0 to 1 (0.2 retries one write in five), got "${retryRateText}"`);
  else retryRate = Number(retryRateText);
  const configUrl = url('CONFIG_URL', DEFAULTS.CONFIG_URL);
  const adminToken = text('ADMIN_TOKEN', '');
  if (adminToken === '')
    problems.push(
      'ADMIN_TOKEN is required: the control plane admin token (npm start prints it and keeps it in .tessera/control-plane.tokens)',
    );
  const [durationText, durationMs] = duration('DURATION', DEFAULTS.DURATION);
  const [, settleMs] = duration('SETTLE', DEFAULTS.SETTLE);
  const ns = text('NS', defaultNamespace(workload));
  if (!/^[A-Za-z0-9_-]+\.[A-Za-z0-9_.-]+$/.test(ns)) problems.push(`NS must be "<db>.<collection>", got "${ns}"`);
  const p99Ms = integer('P99_MS', DEFAULTS.P99_MS, 1, 600_000);
  const [, helloIntervalMs] = duration('HELLO_INTERVAL', DEFAULTS.HELLO_INTERVAL);
  const retryWritesText = text('RETRY_WRITES', String(DEFAULTS.RETRY_WRITES));
  if (retryWritesText !== 'true' && retryWritesText !== 'false')
    problems.push(`RETRY_WRITES must be "true" or "false", got "${retryWritesText}"`);
  const addShardAfterText = env.ADD_SHARD_AFTER;
  let addShardAfterMs = Math.round(durationMs / 3);
  if (addShardAfterText !== undefined && addShardAfterText !== '') {
    const ms = parseDuration(addShardAfterText);
    if (ms === undefined || ms >= durationMs)
      problems.push(`ADD_SHARD_AFTER must be a duration shorter than DURATION, got "${addShardAfterText}"`);
    else addShardAfterMs = ms;
  }

  const options: WorkloadOptions = {
    workload,
    routerUrl,
    routerUrls,
    configUrl,
    adminToken,
    apiKey: text('API_KEY', ''),
    viewerToken: text('VIEWER_TOKEN', adminToken),
    vus: integer('VUS', DEFAULTS.VUS, 1, 10_000),
    duration: durationText,
    durationMs,
    chunkSizeBytes: bytes('CHUNK_SIZE', DEFAULTS.CHUNK_SIZE, MIN_CHUNK_SIZE),
    docBytes: bytes('DOC_BYTES', DEFAULTS.DOC_BYTES, MIN_DOC_BYTES),
    batch: integer('BATCH', DEFAULTS.BATCH, 1, 10_000),
    ns,
    p99Ms,
    maxErrorRate: workload === 'add-shard-under-load' || workload === 'router-roll' ? 0 : 0.001,
    settleMs,
    summaryPath: text('SUMMARY_PATH', `loadtests/results/${workload}-summary.json`),
    seedDocs: integer('SEED_DOCS', DEFAULTS.SEED_DOCS, 1, 10_000_000),
    subscribers: integer('SUBSCRIBERS', DEFAULTS.SUBSCRIBERS, 1, 100_000),
    newShardName: text('NEW_SHARD_NAME', DEFAULTS.NEW_SHARD_NAME),
    newShardUrl: url('NEW_SHARD_URL', DEFAULTS.NEW_SHARD_URL),
    addShardAfterMs,
    retryRate,
    accounts: integer('ACCOUNTS', DEFAULTS.ACCOUNTS, 2, 1_000_000),
    openingBalance: integer('OPENING_BALANCE', DEFAULTS.OPENING_BALANCE, 1, 1_000_000_000),
    maxTxnRetries: integer('MAX_TXN_RETRIES', DEFAULTS.MAX_TXN_RETRIES, 0, 100),
    helloIntervalMs,
    retryWrites: retryWritesText !== 'false',
  };
  if (problems.length > 0) throw new OptionsError(problems);
  return options;
}

/** The headers of a request to a router: JSON, and the API key when there is one. */
export function routerHeaders(options: WorkloadOptions): Record<string, string> {
  return options.apiKey === ''
    ? { 'content-type': 'application/json' }
    : { 'content-type': 'application/json', authorization: `Bearer ${options.apiKey}` };
}

/** The options as they go into the JSON summary: everything but the tokens and the key. */
export function describeOptions(options: WorkloadOptions): Record<string, string | number> {
  const { adminToken: _admin, viewerToken: _viewer, apiKey: _apiKey, routerUrls, retryWrites, ...rest } = options;
  return { ...rest, routerUrls: routerUrls.join(','), retryWrites: String(retryWrites) };
}
