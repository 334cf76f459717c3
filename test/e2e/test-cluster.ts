import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { inject } from 'vitest';
import type { ConfigClient } from '@tessera/protocol';
import { type LocalClusterOptions, LocalCluster, freePort } from '../../tools/cluster/local-cluster.js';
import { waitForLeader } from './helpers.js';
import { RouterApi } from './router-api.js';

export const repoRoot = new URL('../..', import.meta.url).pathname;
export const distDir = join(repoRoot, 'dist');

/**
 * A local cluster of real processes on the test run's Postgres, with free ports and its own
 * databases, so several test files can run side by side. Call `dispose` in afterAll.
 */
export async function startTestCluster(
  options: Partial<
    Pick<LocalClusterOptions, 'shards' | 'spareShards' | 'routers' | 'configs' | 'configSeedList' | 'env' | 'nodeEnv' | 'tlsDir'>
  > = {},
): Promise<{ cluster: LocalCluster; dispose: () => Promise<void> }> {
  const rootDir = mkdtempSync(join(tmpdir(), 'tessera-e2e-'));
  chmodSync(rootDir, 0o755);
  const shardCount = (options.shards ?? 2) + (options.spareShards ?? 0);
  const routerCount = options.routers ?? 1;
  const ports = async (n: number) => Promise.all(Array.from({ length: n }, () => freePort()));
  const cluster = new LocalCluster({
    rootDir,
    distDir,
    shards: options.shards ?? 2,
    spareShards: options.spareShards ?? 0,
    routers: routerCount,
    pgUrl: inject('pgAdminUrl'),
    pgPort: 0,
    fresh: true,
    configs: options.configs ?? 1,
    configSeedList: options.configSeedList ?? 'all',
    nodeEnv: options.nodeEnv,
    ...(options.tlsDir === undefined ? {} : { tlsDir: options.tlsDir }),
    ports: { config: await ports(options.configs ?? 1), router: await ports(routerCount), shard: await ports(shardCount) },
    databasePrefix: `e2e_${Math.random().toString(36).slice(2, 8)}`,
    env: { TESSERA_LOG_LEVEL: 'info', ...options.env },
  });
  await cluster.start();
  return {
    cluster,
    dispose: async () => {
      await cluster.stop();
      // TESSERA_E2E_KEEP=1 keeps the nodes' logs (rootDir/logs) for a look after the run.
      if (process.env.TESSERA_E2E_KEEP === '1') console.log(`kept the cluster's files in ${rootDir}`);
      else rmSync(rootDir, { recursive: true, force: true });
    },
  };
}

/** A client of router `index` signed in as the cluster's root user. */
export function rootApi(cluster: LocalCluster, index = 0): RouterApi {
  return new RouterApi(cluster.routerUrls[index]!, `Bearer ${cluster.rootKey}`, cluster.tlsCa());
}

/** A started test cluster with what most end-to-end files use: a config client, a router client and a pool on the config database. */
export interface RoutedTestCluster {
  cluster: LocalCluster;
  config: ConfigClient;
  api: RouterApi;
  /** The config database, to read the catalog and the changelog behind the API. */
  catalog: pg.Pool;
  /** Closes the clients, then stops the cluster. */
  stop(): Promise<void>;
}

/** `startTestCluster` with one router, once a config leader is elected. */
export async function startRoutedTestCluster(options: Parameters<typeof startTestCluster>[0] = {}): Promise<RoutedTestCluster> {
  const { cluster, dispose } = await startTestCluster({ routers: 1, ...options });
  const config = cluster.configClient();
  const api = rootApi(cluster);
  const catalog = new pg.Pool({ connectionString: cluster.node('config').env.TESSERA_DATABASE_URL, max: 2 });
  await waitForLeader(config);
  return {
    cluster,
    config,
    api,
    catalog,
    stop: async () => {
      await catalog.end();
      await api.close();
      await dispose();
    },
  };
}
