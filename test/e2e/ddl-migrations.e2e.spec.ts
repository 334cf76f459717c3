import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConfigClient } from '@tessera/protocol';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';
import { FAST_CONFIG_ENV, eventually } from './helpers.js';
import { RouterApi, onShardDatabase } from './router-api.js';
import { type RoutedTestCluster, startRoutedTestCluster } from './test-cluster.js';

// dropCollection and refineCollectionShardKey beside a migration of the same collection: the
// DDL turns migrations off and waits for the one in flight to end (it aborts: its commit is
// refused) before it touches the shards. The donor pauses 3 s in cloning, so the DDL arrives
// while the migration runs.

let started: RoutedTestCluster;
let cluster: LocalCluster;
let config: ConfigClient;
let api: RouterApi;
let catalog: pg.Pool;

beforeAll(async () => {
  started = await startRoutedTestCluster({
    shards: 2,
    env: {
      ...FAST_CONFIG_ENV,
      TESSERA_ORPHAN_CLEANUP_DELAY_SECS: '0',
      TESSERA_FAILPOINTS: 'migration.donor.cloning@ddlmig.dropped=3000,migration.donor.cloning@ddlmig.refined=3000',
    },
  });
  ({ cluster, config, api, catalog } = started);
  await config.enableSharding({ db: 'ddlmig', primaryShard: 'shard0' });
});

afterAll(async () => started?.stop());

const DOCUMENTS = 200;

async function shardedWithDocuments(ns: string): Promise<string> {
  const [db, coll] = ns.split('.');
  const { uuid } = await config.shardCollection({ ns, key: { x: 1 } });
  const documents = Array.from({ length: DOCUMENTS }, (_, i) => ({ _id: i, x: i, y: i % 7 }));
  expect((await api.call('POST', `/v1/${db}/${coll}/insert`, { documents })).status).toBe(200);
  return uuid;
}

/** Starts moving the collection's only chunk to shard1; resolves, once the migration is registered, with its outcome to come. */
async function migrationUnderWay(ns: string): Promise<{ outcome: Promise<{ settledAt: number; error?: unknown }> }> {
  const moving = config
    .moveRange({ ns, min: { x: { $minKey: 1 } }, toShard: 'shard1' })
    .then(() => ({ settledAt: Date.now() }))
    .catch((error: unknown) => ({ settledAt: Date.now(), error }));
  await eventually(
    async () => ((await catalog.query('SELECT 1 FROM active_migrations WHERE ns = $1', [ns])).rowCount! > 0 ? true : undefined),
    'the migration registered',
  );
  return { outcome: moving };
}

async function tablesOf(shard: string, uuid: string): Promise<number> {
  return onShardDatabase(cluster, shard, async (pool) => {
    const result = await pool.query('SELECT count(*) AS n FROM pg_tables WHERE tablename = $1', [`c_${uuid.replaceAll('-', '')}`]);
    return Number(result.rows[0].n);
  });
}

async function migrationState(shard: string): Promise<number> {
  return onShardDatabase(cluster, shard, async (pool) =>
    Number((await pool.query('SELECT count(*) AS n FROM migration_registry')).rows[0].n),
  );
}

describe('DDL beside a migration', () => {
  it('dropCollection waits for the migration in flight to end, then leaves nothing of the collection anywhere', async () => {
    const ns = 'ddlmig.dropped';
    const uuid = await shardedWithDocuments(ns);
    const moving = await migrationUnderWay(ns);

    const dropped = await config.dropCollection({ ns });
    const droppedAt = Date.now();
    const migration = await moving.outcome;
    expect(dropped.dropped).toBe(true);
    expect(migration.error).toMatchObject({ code: 'CONFLICTING_OPERATION' });
    expect(migration.settledAt, 'the migration ended before the drop answered').toBeLessThanOrEqual(droppedAt);

    const left = await eventually(async () => {
      const counts = await Promise.all(['shard0', 'shard1'].map(async (s) => (await tablesOf(s, uuid)) + (await migrationState(s))));
      return counts.every((n) => n === 0) ? counts : undefined;
    }, 'no table and no migration state left on either shard');
    expect(left).toEqual([0, 0]);
    expect((await catalog.query('SELECT 1 FROM active_migrations WHERE collection_uuid = $1', [uuid])).rowCount).toBe(0);
  }, 30_000);

  it('refineCollectionShardKey waits for the migration in flight to end, and every document reads back once by the new key', async () => {
    const ns = 'ddlmig.refined';
    await shardedWithDocuments(ns);
    const moving = await migrationUnderWay(ns);

    const refined = await config.refineCollectionShardKey({ ns, key: { x: 1, y: 1 } });
    const refinedAt = Date.now();
    const migration = await moving.outcome;
    expect(refined.key).toEqual({ x: 1, y: 1 });
    expect(migration.error).toMatchObject({ code: 'CONFLICTING_OPERATION' });
    expect(migration.settledAt).toBeLessThanOrEqual(refinedAt);

    const all = (await api.findAll(ns, { filter: {} })) as Array<{ _id: number }>;
    expect(all).toHaveLength(DOCUMENTS);
    expect(new Set(all.map((d) => d._id)).size).toBe(DOCUMENTS);
    // By the whole new key, and by its prefix (the shards' scans use the re-keyed index).
    for (const filter of [{ x: 17, y: 3 }, { x: 17 }]) {
      const found = await api.call('POST', '/v1/ddlmig/refined/find', { filter });
      expect((found.json.cursor as { firstBatch: unknown[] }).firstBatch).toEqual([{ _id: 17, x: 17, y: 3 }]);
    }
    expect(new Set((await config.getChunks({ ns })).chunks.map((c) => c.shard))).toEqual(new Set(['shard0']));
    // Migrations are allowed again once the refine has committed.
    const moved = await config.moveRange({ ns, min: { x: { $minKey: 1 }, y: { $minKey: 1 } }, toShard: 'shard1' });
    expect(moved.documentsCloned).toBe(DOCUMENTS);
  }, 30_000);
});
