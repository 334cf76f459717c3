import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';
import { FAST_CONFIG_ENV, errorOf, eventually, waitForLeader } from './helpers.js';
import { startTestCluster } from './test-cluster.js';

let cluster: LocalCluster;
let dispose: () => Promise<void>;
let catalog: pg.Pool;

const PAUSE = '60000';

beforeAll(async () => {
  ({ cluster, dispose } = await startTestCluster({
    shards: 2,
    routers: 0,
    configs: 2,
    env: FAST_CONFIG_ENV,
    // Only the first config process pauses, inside the phases the test kills it in.
    nodeEnv: {
      config: { TESSERA_FAILPOINTS: `ddl.shardCollection.commit@alpha.sharded=${PAUSE},ddl.dropCollection.drop@beta.dropped=${PAUSE}` },
    },
  }));
  catalog = new pg.Pool({ connectionString: cluster.node('config').env.TESSERA_DATABASE_URL, max: 2 });
  await waitForLeader(cluster.configClient());
});

afterAll(async () => {
  await catalog?.end();
  await dispose?.();
});

async function phaseOf(resource: string): Promise<string | undefined> {
  const rows = await catalog.query<{ phase: string }>(
    "SELECT phase FROM ddl_coordinators WHERE resource = $1 AND phase NOT IN ('done', 'failed')",
    [resource],
  );
  return rows.rows[0]?.phase;
}

async function count(sql: string, params: unknown[] = []): Promise<number> {
  return Number((await catalog.query<{ n: string }>(`SELECT count(*) AS n FROM (${sql}) q`, params)).rows[0]!.n);
}

describe('config server failover', () => {
  it('refuses DDL on a follower, naming the leader', async () => {
    const follower = cluster.configClient('config1');
    expect((await follower.leader()).self.isLeader).toBe(false);
    const error = await errorOf(follower.enableSharding({ db: 'anywhere' }));
    expect(error.code).toBe('NOT_LEADER');
    expect(error.retryable).toBe(true);
    expect(error.details).toEqual({ leader: cluster.node('config').url });
  });

  it('finishes, exactly once, a shardCollection and a dropCollection whose leader was killed mid-phase', async () => {
    const leader = cluster.configClient();
    await leader.shardCollection({ ns: 'beta.dropped', key: { k: 'hashed' } });
    const dropped = await catalog.query<{ uuid: string }>("SELECT uuid FROM collections WHERE ns = 'beta.dropped'");

    const sharding = leader.shardCollection({ ns: 'alpha.sharded', key: { k: 1 } }).catch((e: unknown) => e);
    const dropping = leader.dropCollection({ ns: 'beta.dropped' }).catch((e: unknown) => e);
    await eventually(
      async () => ((await phaseOf('alpha.sharded')) === 'commit' ? true : undefined),
      'shardCollection to reach its commit phase',
    );
    await eventually(async () => ((await phaseOf('beta.dropped')) === 'drop' ? true : undefined), 'dropCollection to reach its drop phase');

    await cluster.kill('config', 'SIGKILL');
    expect((await sharding) instanceof Error).toBe(true);
    expect((await dropping) instanceof Error).toBe(true);

    const successor = cluster.configClient('config1');
    const started = Date.now();
    await waitForLeader(successor);
    // FAST_CONFIG_ENV: lease 2 s, renewals every 200 ms.
    expect(Date.now() - started).toBeLessThan(2_000 + 200 + 1_500);

    await eventually(
      async () => ((await phaseOf('alpha.sharded')) === undefined && (await phaseOf('beta.dropped')) === undefined ? true : undefined),
      'both coordinators to finish',
    );
    expect(
      await count(
        "SELECT 1 FROM ddl_coordinators WHERE phase = 'done' AND ((kind = 'shardCollection' AND resource = 'alpha.sharded') OR (kind = 'dropCollection' AND resource = 'beta.dropped'))",
      ),
    ).toBe(2);
    expect(await count("SELECT 1 FROM collections WHERE ns = 'alpha.sharded'")).toBe(1);
    expect(await count("SELECT 1 FROM changelog WHERE what = 'shardCollection.end' AND ns = 'alpha.sharded'")).toBe(1);
    expect(await count("SELECT 1 FROM collections WHERE ns = 'beta.dropped'")).toBe(0);
    expect(await count('SELECT 1 FROM chunks WHERE collection_uuid = $1', [dropped.rows[0]!.uuid])).toBe(0);
    expect(await count("SELECT 1 FROM changelog WHERE what = 'dropCollection' AND ns = 'beta.dropped'")).toBe(1);
    expect(await count('SELECT 1 FROM locks')).toBe(0);

    // The same request again answers the collection the resumed coordinator created.
    const again = await successor.shardCollection({ ns: 'alpha.sharded', key: { k: 1 } });
    expect(again.chunks).toBe(1);
    for (const shard of cluster.shardNodes) {
      const pool = new pg.Pool({ connectionString: shard.env.TESSERA_DATABASE_URL, max: 1 });
      const tables = (await pool.query<{ ns: string }>('SELECT ns FROM collections')).rows.map((r) => r.ns);
      await pool.end();
      expect(tables, shard.name).not.toContain('beta.dropped');
    }
  });

  it('lets the restarted process rejoin as a follower', async () => {
    await cluster.restart('config');
    const restarted = cluster.configClient();
    expect((await restarted.leader()).self.isLeader).toBe(false);
    expect((await restarted.leader()).leader?.url).toBe(cluster.node('config1').url);
  });
});
