import { z } from 'zod';
import { MIN_CLUSTER_KEY_LENGTH } from '@tessera/protocol';

/**
 * Settings come from environment variables, are validated once at boot, and are then passed
 * around as a typed, frozen object. A bad or missing setting stops the process with a message
 * that names the variable and says what was expected.
 */
export class SettingsError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'SettingsError';
  }
}

const port = (fallback: number) => z.coerce.number().int().min(1).max(65535).default(fallback);
const positiveMs = (fallback: number) => z.coerce.number().int().min(1).max(86_400_000).default(fallback);

/** Settings every node has. `port` default differs per role. */
export const commonSettingsShape = (defaultPort: number) => ({
  TESSERA_CLUSTER_KEY: z
    .string({ error: 'is required: the shared secret every internal request is signed with' })
    .min(MIN_CLUSTER_KEY_LENGTH, `must be at least ${MIN_CLUSTER_KEY_LENGTH} characters`),
  TESSERA_HOST: z.string().min(1).default('127.0.0.1'),
  TESSERA_PORT: port(defaultPort),
  /** The URL other nodes use to reach this one; defaults to http://HOST:PORT (https:// with TLS). */
  TESSERA_ADVERTISE_URL: z.url({ protocol: /^https?$/ }).optional(),
  /** With TESSERA_TLS_KEY_FILE: the PEM certificate (chain) this node serves HTTPS with, on its one port. */
  TESSERA_TLS_CERT_FILE: z.string().min(1).optional(),
  /** The PEM private key of TESSERA_TLS_CERT_FILE. */
  TESSERA_TLS_KEY_FILE: z.string().min(1).optional(),
  /** PEM certificate authorities this node trusts when it calls other nodes over HTTPS (unset: the system's). */
  TESSERA_TLS_CA_FILE: z.string().min(1).optional(),
  TESSERA_NODE_NAME: z.string().min(1).max(100).optional(),
  TESSERA_LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  TESSERA_SHUTDOWN_TIMEOUT_MS: positiveMs(10_000),
  /** Shut down when standard input closes: set by the local launcher so no node outlives it. */
  TESSERA_STOP_ON_STDIN_CLOSE: z.stringbool().default(false),
  /**
   * How this node talks to shards: `wire`, framed messages over one kept connection per shard
   * (see wire-client.ts), or `http`, a request per message from a keep-alive pool. Both carry
   * the same signed messages.
   */
  TESSERA_SHARD_TRANSPORT: z.enum(['wire', 'http']).default('wire'),
  /** Test-only pauses, `name=ms,...` (see failpoints.ts). */
  TESSERA_FAILPOINTS: z
    .string()
    .regex(/^([\w.@:-]+=\d+)?(,[\w.@:-]+=\d+)*$/, 'must be a comma list of name=milliseconds')
    .default(''),
});

export const databaseSettingsShape = {
  TESSERA_DATABASE_URL: z
    .string({ error: 'is required: the PostgreSQL connection string of this node, e.g. postgres://user@127.0.0.1:5432/tessera_shard0' })
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// connection string'),
  TESSERA_DATABASE_POOL_SIZE: z.coerce.number().int().min(1).max(200).default(10),
};

export { positiveMs as millisecondsSetting };

/**
 * Parses `env` with `schema`. Returns the typed settings; throws `SettingsError` listing every
 * problem at once (variable name, what was expected, what was given).
 */
export function loadSettings<S extends z.ZodObject>(schema: S, env: NodeJS.ProcessEnv): Readonly<z.output<S>> {
  const relevant: Record<string, string> = {};
  for (const key of Object.keys(schema.shape)) {
    const value = env[key];
    if (value !== undefined && value !== '') relevant[key] = value;
  }
  const result = schema.safeParse(relevant);
  if (result.success) return Object.freeze(result.data);
  const problems = result.error.issues.map((issue) => {
    const name = issue.path.join('.') || '(environment)';
    const given = relevant[String(issue.path[0])];
    const shown = given === undefined ? 'not set' : name.includes('KEY') ? 'given (hidden)' : `got "${given}"`;
    return `${name}: ${issue.message} (${shown})`;
  });
  throw new SettingsError(problems);
}

/** The URL other nodes use to reach this node. */
export function advertisedUrl(settings: {
  TESSERA_HOST: string;
  TESSERA_PORT: number;
  TESSERA_ADVERTISE_URL?: string | undefined;
  TESSERA_TLS_CERT_FILE?: string | undefined;
}): string {
  if (settings.TESSERA_ADVERTISE_URL !== undefined) return new URL(settings.TESSERA_ADVERTISE_URL).origin;
  const host = settings.TESSERA_HOST === '0.0.0.0' ? '127.0.0.1' : settings.TESSERA_HOST;
  return `${settings.TESSERA_TLS_CERT_FILE === undefined ? 'http' : 'https'}://${host}:${settings.TESSERA_PORT}`;
}
