/**
 * Every node is given every config process (a seed list, as a connection string names a config
 * replica set), and goes to any live one. Two config processes, two shards, one router: while
 * clients insert through the router, the config process that every node talks to first (and
 * that leads) is killed (-9); then a chunk moves, which the donor must commit through a config
 * process and the router must learn of from one. No insert may fail and every acknowledged one
 * must be there.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';
import { FAST_CONFIG_ENV, eventually, waitForLeader } from './helpers.js';
import type { RouterApi } from './router-api.js';
import { rootApi, startTestCluster } from './test-cluster.js';

const NS = 'seeds.items';
const LOOPS = 4;
let cluster: LocalCluster;
let dispose: () => Promise<void>;

beforeAll(async () => {
  ({ cluster, dispose } = await startTestCluster({ shards: 2, routers: 1, configs: 2, env: FAST_CONFIG_ENV }));
  const config = cluster.configClient();
  await waitForLeader(config);
  await config.updateSettings({ balancer: { mode: 'off' }, autoSplit: false });
  await config.enableSharding({ db: 'seeds', primaryShard: 'shard0' });
  await config.shardCollection({ ns: NS, key: { _id: 1 } });
  await config.configureCollectionBalancing({ ns: NS, enableAutoMerger: false });
}, 120_000);

afterAll(async () => {
  await dispose?.();
});

/** Inserts `{ _id }` from LOOPS loops until `done`; answers the acknowledged ids and the failures. */
async function insertUntil(router: RouterApi, done: () => boolean): Promise<{ acknowledged: number[]; failures: string[] }> {
  const acknowledged: number[] = [];
  const failures: string[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: LOOPS }, async () => {
      while (!done()) {
        const _id = next++;
        const answer = await router.call('POST', '/v1/seeds/items/insert', { documents: [{ _id }] });
        if (answer.status === 200 && answer.json.insertedCount === 1) acknowledged.push(_id);
        else failures.push(`${_id}: HTTP ${answer.status} ${JSON.stringify(answer.json).slice(0, 200)}`);
      }
    }),
  );
  return { acknowledged, failures };
}

describe('config processes as a seed list', () => {
  it('keeps routers and shards working when the config process they use is killed', async () => {
    const router = rootApi(cluster);
    let stop = false;
    const load = insertUntil(router, () => stop);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    await cluster.kill('config');
    // The survivor takes the lead once the dead one's lease runs out, and moves a chunk: the donor
    // commits it through the survivor, and the router, refused as stale, refreshes from it.
    const survivor = cluster.configClient('config1');
    await waitForLeader(survivor);
    await eventually(
      () =>
        survivor
          .moveRange({ ns: NS, min: { _id: 1_000_000 }, max: { _id: { $maxKey: 1 } }, toShard: 'shard1' })
          .then(() => true)
          .catch(() => undefined),
      'the chunk to move through the surviving config process',
    );
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    // After the move, a routed insert above 1,000,000 reaches shard1 only with fresh routing.
    const moved = await router.call('POST', '/v1/seeds/items/insert', { documents: [{ _id: 2_000_000 }] });
    stop = true;
    const { acknowledged, failures } = await load;
    expect(failures).toEqual([]);
    expect(moved.json).toMatchObject({ insertedCount: 1 });
    expect(acknowledged.length).toBeGreaterThan(0);
    const stored = (await router.findAll(NS, { filter: {} })) as Array<{ _id: number }>;
    const ids = new Set(stored.map((d) => d._id));
    expect(acknowledged.filter((id) => !ids.has(id))).toEqual([]);
    expect(ids.has(2_000_000)).toBe(true);
    await router.close();
  });
});
