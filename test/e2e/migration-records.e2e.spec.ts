import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConfigClient, RemoveShardResult } from '@tessera/protocol';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';
import { FAST_CONFIG_ENV, errorOf, eventually, waitForLeader } from './helpers.js';
import type { RouterApi } from './router-api.js';
import { rootApi, startTestCluster } from './test-cluster.js';

/**
 * A migration's record on the config server (`active_migrations`) ends with its migration,
 * whichever node fails: the recipient killed while cloning (the donor answers its
 * unreachability), the donor killed (its recovery finishes it and tells the config server), the donor unable to
 * reach its config server (it answers before registering anything), and a record no shard runs
 * (the leader's reconciler). After each, the chunk splits again and the recipient drains.
 * The auto-merger leaves a chunk being migrated alone.
 */

const PAUSE_MS = 4_000;
const DB = 'records';
/** shard0 is the database's primary and every collection's donor; each test's recipient (shard1-4) is drained after it. */
const PRIMARY = 'shard0';
const pad = 'p'.repeat(500);

let cluster: LocalCluster;
let dispose: () => Promise<void>;
let config: ConfigClient;
let api: RouterApi;
let catalog: pg.Pool;

beforeAll(async () => {
  ({ cluster, dispose } = await startTestCluster({
    configs: 2,
    // Every node knows the first config process only (see the unreachable config server below).
    configSeedList: 'first',
    shards: 5,
    routers: 1,
    env: {
      ...FAST_CONFIG_ENV,
      TESSERA_ORPHAN_CLEANUP_DELAY_SECS: '0',
      TESSERA_MIGRATION_CLONE_BATCH_DOCUMENTS: '100',
      TESSERA_MIGRATION_RECORD_GRACE_MS: '1000',
      TESSERA_MIGRATION_RECONCILE_INTERVAL_MS: '500',
      TESSERA_AUTO_MERGER_INTERVAL_SECS: '1',
      TESSERA_AUTO_MERGER_THROTTLING_MS: '100',
      TESSERA_MIN_SNAPSHOT_HISTORY_WINDOW_SECS: '0',
      TESSERA_TRANSACTION_LIFETIME_LIMIT_SECS: '0',
      TESSERA_FAILPOINTS: [
        `migration.recipient.firstCloneBatch@${DB}.recipientKilled=${PAUSE_MS}`,
        `migration.donor.steady@${DB}.donorKilled=${PAUSE_MS}`,
        `migration.donor.cloning@${DB}.merging=${PAUSE_MS}`,
      ].join(','),
    },
  }));
  config = cluster.configClient();
  api = rootApi(cluster);
  catalog = new pg.Pool({ connectionString: cluster.node('config').env.TESSERA_DATABASE_URL, max: 2 });
  await waitForLeader(config);
  await config.enableSharding({ db: DB, primaryShard: PRIMARY });
}, 120_000);

afterAll(async () => {
  await catalog?.end();
  await api?.close();
  await dispose?.();
});

/** Shards `ns` on x, left alone by the balancer, with `count` documents in its one chunk on the primary. */
async function collection(ns: string, count = 500): Promise<void> {
  await config.shardCollection({ ns, key: { x: 1 } });
  await config.configureCollectionBalancing({ ns, enableBalancing: false, enableAutoMerger: false });
  await api.insertMany(
    ns,
    Array.from({ length: count }, (_, i) => ({ _id: `${ns}-${i}`, x: i, pad })),
    250,
  );
}

async function recordsOf(ns: string): Promise<Array<{ id: string }>> {
  return (await catalog.query<{ id: string }>('SELECT id FROM active_migrations WHERE ns = $1', [ns])).rows;
}

async function changelog(ns: string, what: string): Promise<Array<{ details: Record<string, unknown> }>> {
  return (await catalog.query('SELECT details FROM changelog WHERE ns = $1 AND what = $2 ORDER BY id', [ns, what])).rows;
}

async function reachedPhase(ns: string, phase: string): Promise<true | undefined> {
  return (await changelog(ns, 'moveChunk.phase')).some((r) => r.details.phase === phase) ? true : undefined;
}

/** The record of `ns`'s migration is gone, by the path `removedBy` says. */
async function expectRecordGone(ns: string, removedBy: 'answer' | 'reconciler'): Promise<void> {
  await eventually(async () => ((await recordsOf(ns)).length === 0 ? true : undefined), `the migration record of ${ns} to go`, 30_000);
  expect((await changelog(ns, 'moveChunk.recordRemoved')).length > 0).toBe(removedBy === 'reconciler');
}

/**
 * With 64 KiB chunks, writes split the chunk that was being migrated. Writes go on until it
 * splits: a shard reads a collection's max chunk size again only every 10 s.
 */
async function expectSplitsAgain(ns: string): Promise<void> {
  const before = (await config.getChunks({ ns })).chunks.length;
  await config.configureCollectionBalancing({ ns, chunkSizeBytes: 64 * 1024 });
  let next = 0;
  await eventually(
    async () => {
      await api.insertMany(
        ns,
        Array.from({ length: 50 }, () => ({ _id: `${ns}-more-${next}`, x: 1000 + next++, pad })),
        50,
      );
      return (await config.getChunks({ ns })).chunks.length > before ? true : undefined;
    },
    `a chunk of ${ns} to split`,
    40_000,
  );
}

/** The client of whichever config process leads (removeShard runs on the leader). */
async function leader(): Promise<ConfigClient> {
  return eventually(async () => {
    for (const client of [config, cluster.configClient('config1')]) {
      if ((await client.leader().catch(() => undefined))?.self.isLeader) return client;
    }
    return undefined;
  }, 'a config leader');
}

/** removeShard until the shard leaves; every answer on the way names what holds it. */
async function expectDrainCompletes(shard: string): Promise<void> {
  let last: RemoveShardResult | undefined;
  await eventually(
    async () => {
      last = await (await leader()).removeShard({ name: shard });
      return last.state === 'completed' ? true : undefined;
    },
    `${shard} to drain (last answer: ${JSON.stringify(last)})`,
    30_000,
  );
}

describe('a migration record ends with its migration', () => {
  it('when nothing runs it: removeShard names it, and the reconciler settles it as aborted after the grace period', async () => {
    const ns = `${DB}.orphanRecord`;
    await collection(ns, 10);
    const { uuid } = await config.getCollection(ns);
    const id = '00000000-0000-4000-8000-000000000023';
    // Started in the future, so the grace period holds it until the test lets it go.
    await catalog.query(
      `INSERT INTO active_migrations (id, ns, collection_uuid, min, max, min_ejson, max_ejson, donor, recipient, started_at)
       SELECT $1, $2, $3, min, max, min_ejson, max_ejson, shard, 'shard4', now() + interval '1 hour' FROM chunks WHERE collection_uuid = $3`,
      [id, ns, uuid],
    );
    expect(await config.removeShard({ name: 'shard4' })).toMatchObject({ state: 'started', remaining: { chunks: 0, migrations: 1 } });
    const ongoing = await config.removeShard({ name: 'shard4' });
    expect(ongoing).toMatchObject({
      state: 'ongoing',
      remaining: { chunks: 0, jumboChunks: 0, databases: 0, migrations: 1 },
      migrationIds: [id],
    });
    expect(ongoing.note).toContain(`migration ${id} of ${ns} (${PRIMARY} → shard4) in flight`);

    await catalog.query("UPDATE active_migrations SET started_at = now() - interval '1 minute' WHERE id = $1", [id]);
    await expectRecordGone(ns, 'reconciler');
    const [row] = await changelog(ns, 'moveChunk.recordRemoved');
    expect(row?.details).toMatchObject({ migrationId: id, from: PRIMARY, to: 'shard4', decision: 'aborted' });
    const decisions = await catalog.query('SELECT decision FROM migration_decisions WHERE id = $1', [id]);
    expect(decisions.rows).toEqual([{ decision: 'aborted' }]);
    await expectDrainCompletes('shard4');
  }, 60_000);

  it('while a migration runs, the auto-merger leaves its chunk alone; the migration commits, then the rest merges', async () => {
    const ns = `${DB}.merging`;
    await collection(ns, 40);
    const { epoch, timestamp, chunks } = await config.getChunks({ ns });
    await config.commitSplit({
      ns,
      expectedCollectionVersion: { epoch, timestamp },
      shard: PRIMARY,
      range: chunks[0]!.range,
      splitPoints: [[10], [20], [30]],
    });
    const moving = config.moveRange({ ns, min: { x: 20 }, toShard: 'shard3' });
    await eventually(() => reachedPhase(ns, 'cloning'), 'the migration to clone');
    await config.configureCollectionBalancing({ ns, enableAutoMerger: true });
    // Several auto-merger passes (one a second) while the donor holds the migration in cloning.
    await new Promise((resolve) => setTimeout(resolve, PAUSE_MS / 2));
    expect(await changelog(ns, 'merge')).toEqual([]);
    await moving;
    const merged = await eventually(async () => (await changelog(ns, 'merge'))[0], 'the auto-merger to merge what stays on the donor');
    expect(merged.details).toMatchObject({ reason: 'autoMerge', merged: { range: { min: [{ $minKey: 1 }], max: [20] } } });
    expect((await config.getChunks({ ns })).chunks.map((c) => [c.range.min, c.shard])).toEqual([
      [[{ $minKey: 1 }], PRIMARY],
      [[20], 'shard3'],
      [[30], PRIMARY],
    ]);
    await config.dropCollection({ ns });
  }, 60_000);

  it('when the recipient is killed while cloning: the donor aborts and answers, and the answer removes the record', async () => {
    const ns = `${DB}.recipientKilled`;
    await collection(ns);
    const moving = errorOf(config.moveRange({ ns, min: { x: { $minKey: 1 } }, toShard: 'shard1' }));
    await eventually(() => reachedPhase(ns, 'cloning'), 'the migration to clone');
    await cluster.kill('shard1');
    await cluster.restart('shard1');
    // The donor relays its recipient's unreachability as the error of its own answer.
    expect(['HOST_UNREACHABLE', 'NETWORK_TIMEOUT']).toContain((await moving).code);
    await expectRecordGone(ns, 'answer');
    await expectSplitsAgain(ns);
    await expectDrainCompletes('shard1');
  }, 120_000);

  it('when the donor is killed: its recovery finishes it by its decision and says so, which removes the record', async () => {
    const ns = `${DB}.donorKilled`;
    await collection(ns);
    const moving = errorOf(config.moveRange({ ns, min: { x: { $minKey: 1 } }, toShard: 'shard2' }));
    await eventually(() => reachedPhase(ns, 'steady'), 'the migration to reach steady state');
    await cluster.kill(PRIMARY);
    await cluster.restart(PRIMARY);
    expect(await moving).toMatchObject({ code: 'HOST_UNREACHABLE' });
    await expectRecordGone(ns, 'answer');
    const recovered = await eventually(async () => (await changelog(ns, 'moveChunk.recovered'))[0], 'the donor to report its recovery');
    expect(recovered.details).toMatchObject({ decision: 'aborted' });
    await expectSplitsAgain(ns);
    await expectDrainCompletes('shard2');
  }, 120_000);

  it('when the donor cannot reach its config server: it answers before registering, and the answer removes the record', async () => {
    const ns = `${DB}.configUnreachable`;
    await collection(ns);
    // The shards know the first config process only; the second one starts the migration.
    const other = cluster.configClient('config1');
    await cluster.kill('config');
    const error = await errorOf(other.moveRange({ ns, min: { x: { $minKey: 1 } }, toShard: 'shard3' }));
    expect(error).toMatchObject({ code: 'HOST_UNREACHABLE' });
    await expectRecordGone(ns, 'answer');
    await cluster.restart('config');
    await leader();
    await expectSplitsAgain(ns);
    await expectDrainCompletes('shard3');
  }, 120_000);
});
