/**
 * Routers stop without dropping requests: on SIGTERM a router quiesces (TESSERA_QUIESCE_MS, 2 s
 * here) before it shuts down, serving on while `hello` answers ShutdownInProgress with a new
 * topologyVersion, and a client that watches `hello` (as drivers monitor mongos) moves its
 * operations to another router. Every router of two is stopped (SIGTERM) and restarted in turn
 * while four loops insert: no request may fail, and every acknowledged insert must be there.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';
import { FAST_CONFIG_ENV, waitForLeader } from './helpers.js';
import type { RouterApi } from './router-api.js';
import { rootApi, startTestCluster } from './test-cluster.js';

const NS = 'quiesce.items';
const LOOPS = 4;
const MONITOR_MS = 100;
let cluster: LocalCluster;
let dispose: () => Promise<void>;

beforeAll(async () => {
  ({ cluster, dispose } = await startTestCluster({ shards: 2, routers: 2, env: { ...FAST_CONFIG_ENV, TESSERA_QUIESCE_MS: '2000' } }));
  const config = cluster.configClient();
  await waitForLeader(config);
  await config.enableSharding({ db: 'quiesce', primaryShard: 'shard0' });
  await config.shardCollection({ ns: NS, key: { _id: 'hashed' } });
}, 120_000);

afterAll(async () => {
  await dispose?.();
});

/**
 * A client of several routers, as a driver of a mongos list: it asks each router's `hello` every
 * MONITOR_MS and sends operations only to routers that answer it; a ShutdownInProgress answer
 * (quiesce mode) or no answer takes a router out until it answers again.
 */
class RouterPool {
  readonly apis: RouterApi[];
  private readonly usable: boolean[];
  private readonly timer: NodeJS.Timeout;
  private turn = 0;
  /** The `hello` answers seen during quiesce mode. */
  readonly quiesceAnswers: Array<Record<string, unknown>> = [];

  constructor(cluster: LocalCluster) {
    this.apis = cluster.routerUrls.map((_, index) => rootApi(cluster, index));
    this.usable = this.apis.map(() => true);
    this.timer = setInterval(() => void this.monitor(), MONITOR_MS);
  }

  private async monitor(): Promise<void> {
    await Promise.all(
      this.apis.map(async (api, i) => {
        const answer = await api.call('GET', '/v1/hello').catch(() => undefined);
        this.usable[i] = answer?.status === 200;
        if (answer?.json.codeName === 'ShutdownInProgress') this.quiesceAnswers.push(answer.json);
      }),
    );
  }

  /** The next usable router. */
  next(): RouterApi {
    for (let n = 0; n < this.apis.length; n++) {
      const i = this.turn++ % this.apis.length;
      if (this.usable[i]) return this.apis[i]!;
    }
    throw new Error('no router is usable');
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    for (const api of this.apis) await api.close();
  }
}

describe('router quiesce mode', () => {
  it('drops no request while every router is stopped (SIGTERM) and restarted in turn', async () => {
    const pool = new RouterPool(cluster);
    const acknowledged: number[] = [];
    const failures: string[] = [];
    let stop = false;
    let next = 0;
    const load = Promise.all(
      Array.from({ length: LOOPS }, async () => {
        while (!stop) {
          const _id = next++;
          const answer = await pool
            .next()
            .call('POST', '/v1/quiesce/items/insert', { documents: [{ _id }] })
            .catch((error: unknown) => ({ status: 0, json: { error: String(error) } as Record<string, unknown> }));
          if (answer.status === 200 && answer.json.insertedCount === 1) acknowledged.push(_id);
          else failures.push(`${_id}: HTTP ${answer.status} ${JSON.stringify(answer.json).slice(0, 200)}`);
        }
      }),
    );
    for (const router of ['router0', 'router1']) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      await cluster.stopNode(router);
      await cluster.restart(router);
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
    stop = true;
    await load;
    expect(failures).toEqual([]);
    // Both routers were seen quiescing: ShutdownInProgress, not writable, a raised topologyVersion.
    expect(pool.quiesceAnswers[0]).toMatchObject({
      codeName: 'ShutdownInProgress',
      details: { isWritablePrimary: false, topologyVersion: { counter: 1 } },
    });
    expect(acknowledged.length).toBeGreaterThan(100);
    const stored = (await pool.next().findAll(NS, { filter: {} })) as Array<{ _id: number }>;
    const ids = new Set(stored.map((d) => d._id));
    expect(acknowledged.filter((id) => !ids.has(id))).toEqual([]);
    await pool.close();
  }, 120_000);
});
