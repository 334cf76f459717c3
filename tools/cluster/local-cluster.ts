import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, existsSync, readFileSync, type WriteStream } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { Agent } from 'undici';
import { ConfigClient } from '@tessera/protocol';
import { type ControlPlaneTokens, loadClusterKey, loadControlPlaneTokens, loadRootKey } from './cluster-secrets.js';
import { assertPortFree, portAt } from './ports.js';
import { type PostgresServer, externalPostgres, startEmbeddedPostgres } from './postgres.js';

export { type ControlPlaneTokens } from './cluster-secrets.js';
export { freePort } from './ports.js';

export type NodeRole = 'config' | 'shard' | 'router';

export interface LocalClusterOptions {
  /** Where data, logs and the cluster key live (`.tessera` by default). */
  rootDir: string;
  /** Compiled output (`dist`), holding `apps/<role>/src/main.js`. */
  distDir: string;
  shards: number;
  /** Shards started but not added to the cluster, ready for an addShard later. */
  spareShards?: number;
  routers: number;
  /** Config server processes sharing the config database (default 1): `config`, `config1`, ... */
  configs?: number;
  /**
   * Which config processes routers and shards are given: all of them (the default, a seed list)
   * or the first only, as a deployment that names one config process (for tests of a node that
   * loses its config server).
   */
  configSeedList?: 'all' | 'first';
  /** Use this existing Postgres (a URL allowed to create databases) instead of the embedded one. */
  pgUrl?: string;
  /** Embedded Postgres port. */
  pgPort: number;
  /** Wipe data (embedded data directory or this cluster's databases) before starting. */
  fresh: boolean;
  /** A base port (nodes of a role take consecutive ports) or one port per node. */
  ports: { config: number | number[]; router: number | number[]; shard: number | number[] };
  /** Prefix of database names: `<prefix>_config`, `<prefix>_shard0`, ... */
  databasePrefix: string;
  /** Environment added to every node (e.g. shorter intervals in tests). */
  env?: Record<string, string>;
  /** Environment added to one node, by name (e.g. a failpoint on `config`). */
  nodeEnv?: Record<string, Record<string, string>>;
  /** fsync off in the embedded Postgres: for throwaway test clusters. */
  unsafeFastPostgres?: boolean;
  /**
   * Every node serves HTTPS and calls the others over it: a directory made by
   * tools/tls/make-local-ca.sh (ca.pem, node.pem, node.key).
   */
  tlsDir?: string;
  onNodeLine?: (node: ClusterNode, line: string) => void;
  onNodeExit?: (node: ClusterNode, code: number | null, signal: NodeJS.Signals | null) => void;
  onProgress?: (message: string) => void;
}

export interface ClusterNode {
  name: string;
  role: NodeRole;
  url: string;
  port: number;
  env: Record<string, string>;
  process?: ChildProcess;
  /** The last lines the node printed, to show when it dies. */
  tail: string[];
}

const TAIL_LINES = 40;
const READY_TIMEOUT_MS = 60_000;

/**
 * A whole Tessera cluster on this machine: one Postgres server (embedded, or one the user runs)
 * with a database per node, one config server, N shards and M routers as separate OS processes.
 * Used by `npm start` and by the end-to-end tests, so both exercise the same start-up path.
 */
export class LocalCluster {
  readonly nodes: ClusterNode[] = [];
  clusterKey = '';
  /** The control plane's tokens given to the config servers: generated once per data directory unless `env` sets them. */
  controlPlaneTokens: ControlPlaneTokens = { admin: '', viewer: '' };
  /** The root user's API key given to the config servers: generated once per data directory unless `env` sets it. */
  rootKey = '';
  /** Whether this start made the root key (and so may print it, once). */
  rootKeyCreated = false;
  private postgres: PostgresServer | undefined;
  private readonly agent: Agent;
  private readonly logs = new Map<string, WriteStream>();
  private stopping = false;
  private stopped: Promise<void> | undefined;

  constructor(private readonly options: LocalClusterOptions) {
    this.agent = new Agent({ connections: 4, ...(options.tlsDir === undefined ? {} : { connect: { ca: this.tlsCa() } }) });
  }

  /** The CA the nodes' certificates are signed by, when the cluster runs TLS. */
  tlsCa(): Buffer | undefined {
    return this.options.tlsDir === undefined ? undefined : readFileSync(join(this.options.tlsDir, 'ca.pem'));
  }

  get configUrl(): string {
    return this.node('config').url;
  }

  get routerUrls(): string[] {
    return this.nodes.filter((n) => n.role === 'router').map((n) => n.url);
  }

  /** Every shard process, spare ones included. */
  get shardNodes(): ClusterNode[] {
    return this.nodes.filter((n) => n.role === 'shard');
  }

  /** The shards added to the cluster at start. */
  get memberShards(): ClusterNode[] {
    return this.shardNodes.slice(0, this.options.shards);
  }

  node(name: string): ClusterNode {
    const found = this.nodes.find((n) => n.name === name);
    if (found === undefined) throw new Error(`no node named ${name}`);
    return found;
  }

  /** A signed client of a config process (the first one by default). */
  configClient(node = 'config'): ConfigClient {
    return new ConfigClient(this.node(node).url, { clusterKey: this.clusterKey, dispatcher: this.agent });
  }

  /** Starts Postgres and every node, adds the shards, and resolves when all are ready. */
  async start(): Promise<void> {
    const { options } = this;
    const root = resolve(options.rootDir);
    if (options.fresh && options.pgUrl === undefined) await rm(join(root, 'postgres'), { recursive: true, force: true });
    await mkdir(join(root, 'logs'), { recursive: true });
    this.clusterKey = await loadClusterKey(root);
    this.controlPlaneTokens = await loadControlPlaneTokens(root, this.options.env ?? {});
    ({ key: this.rootKey, created: this.rootKeyCreated } = await loadRootKey(root, this.options.env ?? {}));
    this.plan();
    await Promise.all(this.nodes.map((n) => assertPortFree(n.port, n.name)));

    this.progress(
      options.pgUrl === undefined
        ? `starting embedded PostgreSQL on 127.0.0.1:${options.pgPort}`
        : 'using the PostgreSQL server at --pg-url',
    );
    this.postgres =
      options.pgUrl === undefined
        ? await startEmbeddedPostgres({
            dataDir: join(root, 'postgres', 'data'),
            port: options.pgPort,
            unsafeFast: options.unsafeFastPostgres,
          })
        : externalPostgres(options.pgUrl);
    for (const node of this.nodes) {
      if (node.role === 'router') continue;
      // Every config process shares the one config database.
      const database = this.databaseName(node.role === 'config' ? this.node('config') : node);
      if (options.fresh && options.pgUrl !== undefined && (node.role !== 'config' || node.name === 'config'))
        await this.postgres.dropDatabase(database);
      if (node.role !== 'config' || node.name === 'config') await this.postgres.ensureDatabase(database);
      node.env.TESSERA_DATABASE_URL = this.postgres.urlFor(database);
    }

    // The first config server starts alone, so it is the leader when the others join.
    const [firstConfig, ...otherConfigs] = this.nodes.filter((n) => n.role === 'config');
    await this.startNodes([firstConfig!]);
    if (otherConfigs.length > 0) await this.startNodes(otherConfigs);
    await this.startNodes(this.shardNodes);
    const config = this.configClient();
    for (const shard of this.memberShards) await config.addShard({ name: shard.name, url: shard.url });
    this.progress(`added ${this.memberShards.length} shard(s)`);
    await this.startNodes(this.nodes.filter((n) => n.role === 'router'));
  }

  /** Stops every node (routers first, config last) with SIGTERM, then Postgres. Idempotent. */
  stop(): Promise<void> {
    this.stopped ??= this.stopAll();
    return this.stopped;
  }

  private async stopAll(): Promise<void> {
    this.stopping = true;
    for (const role of ['router', 'shard', 'config'] as const) {
      await Promise.all(this.nodes.filter((n) => n.role === role).map((n) => this.stopNode(n.name)));
    }
    await this.postgres?.stop();
    await this.agent.close();
    for (const log of this.logs.values()) log.end();
  }

  /**
   * Sends a signal to one node (SIGKILL for a crash). A signal that ends a process resolves when
   * it has exited; SIGSTOP and SIGCONT (pausing a node, as a long GC pause or a hung host would)
   * resolve once sent, since a paused process never exits.
   */
  async kill(name: string, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const node = this.node(name);
    const child = node.process;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    if (signal === 'SIGSTOP' || signal === 'SIGCONT') {
      child.kill(signal);
      return;
    }
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill(signal);
    await exited;
  }

  /** SIGTERM, then SIGKILL if the node is still running after 15 s. */
  async stopNode(name: string): Promise<void> {
    const node = this.node(name);
    const child = node.process;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    const force = setTimeout(() => child.kill('SIGKILL'), 15_000);
    // A paused node handles SIGTERM only once it runs again.
    child.kill('SIGCONT');
    child.kill('SIGTERM');
    await exited;
    clearTimeout(force);
  }

  /** Starts a node again (after kill or stopNode) and waits until it is ready. */
  async restart(name: string): Promise<void> {
    await this.startNodes([this.node(name)]);
  }

  private plan(): void {
    const { options } = this;
    const common = {
      TESSERA_CLUSTER_KEY: this.clusterKey,
      TESSERA_HOST: '127.0.0.1',
      TESSERA_STOP_ON_STDIN_CLOSE: 'true',
      // Routers stop at once here unless a test asks for quiesce mode (15 s by default).
      TESSERA_QUIESCE_MS: '0',
      ...(options.tlsDir === undefined
        ? {}
        : {
            TESSERA_TLS_CERT_FILE: join(options.tlsDir, 'node.pem'),
            TESSERA_TLS_KEY_FILE: join(options.tlsDir, 'node.key'),
            TESSERA_TLS_CA_FILE: join(options.tlsDir, 'ca.pem'),
          }),
      ...options.env,
    };
    const scheme = options.tlsDir === undefined ? 'http' : 'https';
    const add = (name: string, role: NodeRole, port: number, extra: Record<string, string> = {}) => {
      this.nodes.push({
        name,
        role,
        port,
        url: `${scheme}://127.0.0.1:${port}`,
        env: { ...common, TESSERA_PORT: String(port), TESSERA_NODE_NAME: name, ...extra, ...options.nodeEnv?.[name] },
        tail: [],
      });
    };
    const tokens = {
      TESSERA_ADMIN_TOKEN: this.controlPlaneTokens.admin,
      TESSERA_VIEWER_TOKEN: this.controlPlaneTokens.viewer,
      TESSERA_ROOT_KEY: this.rootKey,
    };
    // Every node is given every config process (a seed list), so it can go to any live one.
    const seeds = options.configSeedList === 'first' ? 1 : (options.configs ?? 1);
    const configs = Array.from({ length: seeds }, (_, i) => `${scheme}://127.0.0.1:${portAt(options.ports.config, i)}`).join(',');
    for (let i = 0; i < (options.configs ?? 1); i++) {
      add(i === 0 ? 'config' : `config${i}`, 'config', portAt(options.ports.config, i), { ...tokens, TESSERA_CONFIG_URLS: configs });
    }
    for (let i = 0; i < options.shards + (options.spareShards ?? 0); i++) add(`shard${i}`, 'shard', portAt(options.ports.shard, i));
    for (let i = 0; i < options.routers; i++) {
      add(`router${i}`, 'router', portAt(options.ports.router, i), { TESSERA_CONFIG_URL: configs });
    }
  }

  private databaseName(node: ClusterNode): string {
    return `${this.options.databasePrefix}_${node.name}`;
  }

  private async startNodes(nodes: ClusterNode[]): Promise<void> {
    for (const node of nodes) this.spawnNode(node);
    await Promise.all(nodes.map((node) => this.waitReady(node)));
    this.progress(`${nodes.map((n) => n.name).join(', ')} ready`);
  }

  private spawnNode(node: ClusterNode): void {
    const main = join(resolve(this.options.distDir), 'apps', node.role, 'src', 'main.js');
    if (!existsSync(main)) throw new Error(`${main} is missing: run "npm run build" first`);
    let log = this.logs.get(node.name);
    if (log === undefined) {
      log = createWriteStream(join(resolve(this.options.rootDir), 'logs', `${node.name}.log`), { flags: 'a' });
      this.logs.set(node.name, log);
    }
    const child = spawn(process.execPath, ['--enable-source-maps', main], {
      env: { ...process.env, ...node.env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    node.process = child;
    node.tail = [];
    const onLine = (line: string) => {
      log.write(`${line}\n`);
      node.tail.push(line);
      if (node.tail.length > TAIL_LINES) node.tail.shift();
      this.options.onNodeLine?.(node, line);
    };
    createInterface({ input: child.stdout! }).on('line', onLine);
    createInterface({ input: child.stderr! }).on('line', onLine);
    child.on('error', (error) => onLine(`[launcher] could not run ${node.name}: ${error.message}`));
    child.once('exit', (code, signal) => {
      if (!this.stopping) this.options.onNodeExit?.(node, code, signal);
    });
  }

  private async waitReady(node: ClusterNode): Promise<void> {
    const deadline = Date.now() + READY_TIMEOUT_MS;
    let last = 'no answer yet';
    while (Date.now() < deadline) {
      const child = node.process;
      if (child?.exitCode !== null || child?.signalCode !== null) {
        throw new NodeFailedError(node, `${node.name} exited (code ${child?.exitCode}, signal ${child?.signalCode}) before it was ready`);
      }
      try {
        const response = await this.agent.request({
          origin: node.url,
          path: '/health',
          method: 'GET',
          headersTimeout: 2_000,
          bodyTimeout: 2_000,
        });
        last = await response.body.text();
        if (response.statusCode === 200) return;
      } catch (error) {
        last = (error as Error).message;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new NodeFailedError(node, `${node.name} was not ready within ${READY_TIMEOUT_MS / 1000} s: ${last}`);
  }

  private progress(message: string): void {
    this.options.onProgress?.(message);
  }
}

/** A node that died or never became ready; carries its last log lines. */
export class NodeFailedError extends Error {
  constructor(
    readonly node: ClusterNode,
    message: string,
  ) {
    super(`${message}\n--- last lines of ${node.name} ---\n${node.tail.join('\n')}`);
    this.name = 'NodeFailedError';
  }
}
