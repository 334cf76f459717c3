import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { TesseraError } from '@tessera/core';
import { type TestDatabase, createTestDatabase } from '../../../../test/pg/test-database.js';
import { k } from '../catalog/catalog-fixture.js';
import { type ClusterState, DdlCluster, SHARD_URLS, failureOf } from '../../../../test/pg/ddl-cluster.js';

let db: TestDatabase;
let cluster: DdlCluster;
let ordersUuid: string;

beforeAll(async () => {
  db = await createTestDatabase('config');
});
afterAll(async () => db?.drop());
beforeEach(async () => {
  cluster = await DdlCluster.start(db.dataSource);
  // The database app has its primary on shard0, which stores the unsharded app.orders and app.archive.
  await cluster.shardedCollection({ ns: 'app.users', key: { uid: 1 }, owners: ['shard0', 'shard1'], splitPoints: [k(0)], documents: 5 });
  ordersUuid = cluster.shards.shard0.storeUnsharded('app.orders', 2);
  cluster.shards.shard0.storeUnsharded('app.archive', 7);
});
afterEach(async () => cluster.stop());

const users = { 'app.users': { key: { uid: 1 }, documents: 5, uuid: 'catalog' as const } };

/** app.orders renamed over app.archive on the primary: the same collection (2 documents), the old archive gone. */
const RENAMED: ClusterState = {
  databases: ['app on shard0 (version 1)'],
  collections: {},
  changelog: ['renameCollection app.orders'],
  coordinators: ['renameCollection app.orders: done'],
  locks: [],
  shards: { shard0: { 'app.archive': { key: { _id: 1 }, documents: 2, uuid: 'unsharded' }, ...users }, shard1: users },
};

const renameOnShard0 = { node: SHARD_URLS.shard0, method: 'POST', path: /^\/internal\/collections\/[^/]+\/rename$/ };
const request = { from: 'app.orders', to: 'app.archive', dropTarget: true };

describe('renameCollection', () => {
  it('renames an unsharded collection on the primary, dropping the target, keeping its uuid', async () => {
    const config = await cluster.leader();
    await expect(config.collections.renameCollection(request)).resolves.toEqual({ ok: 1 });
    expect(config.coordinators.ran).toEqual(['prepare', 'renameOnPrimary']);
    const state = await cluster.state();
    expect({ ...state, collections: {} }).toEqual(RENAMED);
    expect(cluster.shards.shard0.collections.get(ordersUuid)?.ns).toBe('app.archive');
  });

  it.each<[string, Record<string, unknown>, string]>([
    ['an existing target without dropTarget', { from: 'app.orders', to: 'app.archive' }, 'NAMESPACE_EXISTS'],
    ['a missing source', { from: 'app.none', to: 'app.other' }, 'NAMESPACE_NOT_FOUND'],
    ['a sharded source', { from: 'app.users', to: 'app.people' }, 'ILLEGAL_OPERATION'],
    ['a sharded target', { from: 'app.orders', to: 'app.users', dropTarget: true }, 'ILLEGAL_OPERATION'],
    ['a rename across databases', { from: 'app.orders', to: 'other.orders' }, 'ILLEGAL_OPERATION'],
    ['a rename to itself', { from: 'app.orders', to: 'app.orders' }, 'ILLEGAL_OPERATION'],
  ])('refuses %s in prepare, changing nothing', async (_name, refused, code) => {
    const config = await cluster.leader();
    const before = (await cluster.state()).shards;
    expect(await failureOf(config.collections.renameCollection(refused as never))).toMatch(new RegExp(`^${code}`));
    const after = await cluster.state();
    expect(after.shards).toEqual(before);
    expect(after).toMatchObject({ changelog: [], locks: [] });
  });

  it('retries renameOnPrimary when the primary does not answer, and ends as a clean run does', async () => {
    const config = await cluster.leader();
    cluster.network.failNth({ ...renameOnShard0, fault: 'timeout' });
    await expect(config.collections.renameCollection(request)).resolves.toEqual({ ok: 1 });
    expect(config.coordinators.ran).toEqual(['prepare', 'renameOnPrimary', 'renameOnPrimary']);
    expect({ ...(await cluster.state()), collections: {} }).toEqual(RENAMED);
  });

  it.each(['prepare', 'renameOnPrimary'])(
    'a leader that dies after the work of %s leaves the coordinator there, and the next leader finishes it once',
    async (phase) => {
      const dying = await cluster.leader();
      const crashed = dying.coordinators.crashAfter(phase);
      void dying.collections.renameCollection(request);
      await crashed;
      expect(await cluster.coordinator()).toMatchObject({ kind: 'renameCollection', phase });

      const next = await cluster.leader();
      await cluster.settled();
      expect(next.coordinators.ran).toEqual(phase === 'prepare' ? ['prepare', 'renameOnPrimary'] : ['renameOnPrimary']);
      // The repeated renameOnPrimary finds the collection renamed and records the rename once.
      expect({ ...(await cluster.state()), collections: {} }).toEqual(RENAMED);
    },
  );

  it('fails when the primary refuses for good, leaving both collections as they were', async () => {
    const config = await cluster.leader();
    cluster.network.failNth({ ...renameOnShard0, fault: new TesseraError('INTERNAL', 'disk failure') });
    expect(await failureOf(config.collections.renameCollection(request))).toBe('INTERNAL disk failure');
    const failed = await cluster.state();
    expect(failed.shards.shard0).toMatchObject({ 'app.orders': { documents: 2 }, 'app.archive': { documents: 7 } });
    expect(failed).toMatchObject({ changelog: [], locks: [] });
  });
});
