import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { TesseraError } from '@tessera/core';
import { type TestDatabase, createTestDatabase } from '../../../../test/pg/test-database.js';
import { k } from '../catalog/catalog-fixture.js';
import { type ClusterState, DdlCluster, SHARD_URLS, failureOf } from '../../../../test/pg/ddl-cluster.js';

let db: TestDatabase;
let cluster: DdlCluster;

beforeAll(async () => {
  db = await createTestDatabase('config');
});
afterAll(async () => db?.drop());
beforeEach(async () => {
  cluster = await DdlCluster.start(db.dataSource);
  // app.users sharded by uid over both shards; app.orders unsharded on the primary, shard0.
  await cluster.shardedCollection({ ns: 'app.users', key: { uid: 1 }, owners: ['shard0', 'shard1'], splitPoints: [k(0)], documents: 5 });
  cluster.shards.shard0.storeUnsharded('app.orders', 2);
});
afterEach(async () => cluster.stop());

const orders = { 'app.orders': { key: { _id: 1 }, documents: 2, uuid: 'unsharded' as const } };

/** app.users gone from the catalog and from both shards; app.orders untouched. */
const DROPPED: ClusterState = {
  databases: ['app on shard0 (version 1)'],
  collections: {},
  changelog: ['dropCollection app.users'],
  coordinators: ['dropCollection app.users: done'],
  locks: [],
  shards: { shard0: orders, shard1: {} },
};

/** A shard's drop of app.users' table. */
const tableDrop = (shard: keyof typeof SHARD_URLS) => ({ node: SHARD_URLS[shard], method: 'DELETE', path: /^\/internal\/collections\// });

describe('dropCollection', () => {
  it('drops a sharded collection on every shard, then forgets it in the catalog', async () => {
    const config = await cluster.leader();
    await expect(config.collections.dropCollection({ ns: 'app.users' })).resolves.toEqual({ dropped: true });
    expect(config.coordinators.ran).toEqual(['drop']);
    expect(await cluster.state()).toEqual(DROPPED);
  });

  it('drops an unsharded collection wherever a shard stores it', async () => {
    const config = await cluster.leader();
    await expect(config.collections.dropCollection({ ns: 'app.orders' })).resolves.toEqual({ dropped: true });
    const state = await cluster.state();
    expect(state.changelog).toEqual(['dropCollection app.orders']);
    expect(state.shards.shard0).toEqual({ 'app.users': { key: { uid: 1 }, documents: 5, uuid: 'catalog' } });
  });

  it.each<{ fault: string; inject: () => unknown }>([
    {
      fault: "shard1's drop of the table times out",
      inject: () => cluster.network.failNth({ ...tableDrop('shard1'), fault: 'timeout' }),
    },
    {
      fault: 'forgetting it in the catalog is a serialization failure',
      inject: () => cluster.failNextStatement('collections', 'DELETE', 'transient'),
    },
  ])('retries drop when $fault, and ends as a clean run does', async ({ inject }) => {
    const config = await cluster.leader();
    await inject();
    await expect(config.collections.dropCollection({ ns: 'app.users' })).resolves.toEqual({ dropped: true });
    expect(config.coordinators.ran).toEqual(['drop', 'drop']);
    expect(await cluster.state()).toEqual(DROPPED);
  });

  it('a leader that dies after the work of drop leaves the coordinator there, and the next leader repeats it to a clean end', async () => {
    const dying = await cluster.leader();
    const crashed = dying.coordinators.crashAfter('drop');
    void dying.collections.dropCollection({ ns: 'app.users' });
    await crashed;
    expect(await cluster.coordinator()).toEqual({ kind: 'dropCollection', phase: 'drop', leader_term: dying.term });

    const next = await cluster.leader();
    await cluster.settled();
    expect(next.coordinators.ran).toEqual(['drop']);
    expect(await cluster.state()).toEqual(DROPPED);
  });

  it('fails in drop when a shard refuses it for good, keeping the collection in the catalog with migrations stopped; a retry finishes', async () => {
    const config = await cluster.leader();
    cluster.network.failNth({ ...tableDrop('shard1'), fault: new TesseraError('INTERNAL', 'disk failure') });
    expect(await failureOf(config.collections.dropCollection({ ns: 'app.users' }))).toBe('INTERNAL disk failure');
    const failed = await cluster.state();
    // The catalog still names the collection, so it can still be dropped, and no chunk of it moves meanwhile.
    expect(failed.collections['app.users']).toMatchObject({ allowMigrations: false });
    expect(failed).toMatchObject({ changelog: [], coordinators: ['dropCollection app.users: failed (INTERNAL)'], locks: [] });
    expect(failed.shards.shard1).toEqual({ 'app.users': { key: { uid: 1 }, documents: 5, uuid: 'catalog' } });

    await expect(config.collections.dropCollection({ ns: 'app.users' })).resolves.toEqual({ dropped: true });
    expect(await cluster.state()).toEqual({
      ...DROPPED,
      coordinators: ['dropCollection app.users: failed (INTERNAL)', 'dropCollection app.users: done'],
    });
  });
});
