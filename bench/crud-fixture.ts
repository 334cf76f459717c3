import { type ChildProcess, fork } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { Agent, request } from 'undici';
import type { ConfigClient } from '@tessera/protocol';
import { LocalCluster, freePort } from '../tools/cluster/local-cluster.js';
import { BackgroundWork } from './background-work.js';
import type { CrudSettings } from './crud-settings.js';
import { ProcessCpu } from './process-cpu.js';

const repoRoot = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..');

/**
 * What bench:crud holds from before the cluster starts until after it stops, whatever happens
 * between: the scratch directory, the load's HTTP agent, the cluster and the floor's processes.
 */
export interface CrudHost {
  readonly dir: string;
  readonly agent: Agent;
  readonly cluster: LocalCluster;
  /** Every hop-floor process started, to be ended with the cluster. */
  readonly floorProcesses: ChildProcess[];
}

/** One hop-floor server process (see hop-floor-server.ts). */
export interface FloorServer {
  readonly url: string;
  readonly pid: number;
}

/**
 * The started bench: the cluster's config client and router, the raw baseline's database and
 * pool, the floor's relay, and a CPU meter for each of the two shapes.
 */
/** A router to send requests to, and the `Authorization` header it needs, if any. */
export interface RouterAccess {
  readonly url: string;
  readonly authorization?: string;
}

export interface CrudFixture {
  readonly host: CrudHost;
  readonly config: ConfigClient;
  /** router0: authorization disabled. */
  readonly router: string;
  /** router1: authorization enabled, with the root key. */
  readonly authorizingRouter: RouterAccess;
  /** router2: router1's twin with authorization disabled. */
  readonly twinRouter: RouterAccess;
  /** The cluster's processes by group: client, router, shards, config, postgres. */
  readonly cpu: ProcessCpu;
  /** The floor's processes in the same groups: its relay as router, its stores as shards. */
  readonly floorCpu: ProcessCpu;
  readonly background: BackgroundWork;
  /** The raw baseline's database, `bench_raw`, on the cluster's Postgres server. */
  readonly rawUrl: string;
  readonly raw: pg.Pool;
  readonly relay: FloorServer;
  /** Each shard's own database, for what the bench changes beneath the cluster (the size triggers). */
  readonly shardUrls: readonly string[];
}

/** Makes the scratch directory and the agent, and plans the cluster (3 shards, 3 routers) without starting it. */
export async function openCrudHost(settings: CrudSettings): Promise<CrudHost> {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-bench-crud-'));
  chmodSync(dir, 0o755);
  const agent = new Agent({ connections: settings.concurrency * 2 });
  // router1 checks every caller's API key and roles and router2 does not: twins that serve only
  // the authorization comparison, so that they differ in nothing else (router0 serves the rest).
  const cluster = await planBenchCluster(dir, {}, { count: 3, env: { router1: { TESSERA_AUTHORIZATION: 'enabled' } } });
  return { dir, agent, cluster, floorProcesses: [] };
}

/**
 * A fresh local cluster of 3 shards and `routers.count` routers (1 by default) in `rootDir`, on
 * free ports and its own embedded Postgres, planned, not started. Its routers check no callers
 * unless `env` or `routers.env` says so: each bench measures its own feature, and bench:crud
 * measures what checking callers costs, on twin routers.
 */
export async function planBenchCluster(
  rootDir: string,
  env: Record<string, string> = {},
  routers: { count: number; env?: Record<string, Record<string, string>> } = { count: 1 },
): Promise<LocalCluster> {
  return new LocalCluster({
    rootDir,
    distDir: join(repoRoot, 'dist'),
    shards: 3,
    routers: routers.count,
    ...(routers.env === undefined ? {} : { nodeEnv: routers.env }),
    pgPort: await freePort(),
    fresh: true,
    ports: {
      config: await freePort(),
      router: await Promise.all(Array.from({ length: routers.count }, () => freePort())),
      shard: [await freePort(), await freePort(), await freePort()],
    },
    databasePrefix: 'bench',
    env: { TESSERA_LOG_LEVEL: 'warn', TESSERA_AUTHORIZATION: 'disabled', ...env },
    onProgress: (message) => console.log(`  ${message}`),
  });
}

/** Ends the floor's processes, stops the cluster and removes the scratch directory. */
export async function closeCrudHost(host: CrudHost): Promise<void> {
  for (const child of host.floorProcesses) child.kill('SIGTERM');
  await host.cluster.stop();
  await host.agent.close();
  rmSync(host.dir, { recursive: true, force: true });
}

/** Starts the cluster, the raw baseline's database and the floor, and opens the meters. */
export async function startCrudFixture(host: CrudHost, settings: CrudSettings): Promise<CrudFixture> {
  const { cluster } = host;
  await cluster.start();
  const config = cluster.configClient();
  for (let i = 0; i < 50 && !(await config.leader()).self.isLeader; i++) await new Promise((r) => setTimeout(r, 100));
  const router = cluster.routerUrls[0]!;
  const pid = (name: string) => () => [cluster.node(name).process!.pid!];
  const postgresData = join(host.dir, 'postgres', 'data');
  const cpu = new ProcessCpu({
    client: () => [process.pid],
    router: pid('router0'),
    shards: () => ['shard0', 'shard1', 'shard2'].map((name) => cluster.node(name).process!.pid!),
    config: pid('config'),
    postgres: ProcessCpu.postgres(postgresData),
  });
  const background = await BackgroundWork.open(
    cluster.node('shard0').env.TESSERA_DATABASE_URL!,
    cluster.node('config').env.TESSERA_DATABASE_URL!,
  );
  const rawUrl = await createRawDatabase(cluster);
  const raw = new pg.Pool({ connectionString: rawUrl, max: settings.concurrency });

  // The floor: a relay where the router is and stores where the shards are, over bench_raw.
  const stores = await Promise.all(Array.from({ length: settings.floorStores }, () => startFloorServer(host, 'store', rawUrl)));
  const relay = await startFloorServer(host, 'relay', stores.map((s) => s.url).join(','));
  const floorCpu = new ProcessCpu({
    client: () => [process.pid],
    router: () => [relay.pid],
    shards: () => stores.map((s) => s.pid),
    postgres: ProcessCpu.postgres(postgresData),
  });
  const shardUrls = ['shard0', 'shard1', 'shard2'].map((name) => cluster.node(name).env.TESSERA_DATABASE_URL!);
  const authorizingRouter = { url: cluster.routerUrls[1]!, authorization: `Bearer ${cluster.rootKey}` };
  const twinRouter = { url: cluster.routerUrls[2]! };
  return { host, config, router, authorizingRouter, twinRouter, cpu, floorCpu, background, rawUrl, raw, relay, shardUrls };
}

/**
 * Creates the raw baseline's database, where the same rows go shaped as a shard stores them, on
 * the cluster's Postgres server; answers its URL.
 */
async function createRawDatabase(cluster: LocalCluster): Promise<string> {
  const shardUrl = cluster.node('shard0').env.TESSERA_DATABASE_URL!;
  const admin = new pg.Client({ connectionString: shardUrl });
  await admin.connect();
  await admin.query('CREATE DATABASE bench_raw');
  await admin.end();
  return shardUrl.replace(/\/[^/]+$/, '/bench_raw');
}

/** Starts one hop-floor server process (see hop-floor-server.ts); answers its URL and pid. */
async function startFloorServer(host: CrudHost, role: 'store' | 'relay', target: string): Promise<FloorServer> {
  const port = await freePort();
  const child = fork(fileURLToPath(new URL('./hop-floor-server.js', import.meta.url)), [role, String(port), target], { stdio: 'inherit' });
  host.floorProcesses.push(child);
  await new Promise<void>((resolve, reject) => {
    child.once('message', () => resolve());
    child.once('exit', (code) => reject(new Error(`hop-floor ${role} exited with ${code}`)));
  });
  return { url: `http://127.0.0.1:${port}`, pid: child.pid! };
}

/** POSTs a JSON body through `agent` and answers the JSON reply. */
export async function postJson<T>(agent: Agent, url: string, body: unknown, authorization?: string): Promise<T> {
  const response = await request(url, {
    dispatcher: agent,
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(authorization === undefined ? {} : { authorization }) },
    body: JSON.stringify(body),
  });
  return (await response.body.json()) as T;
}
