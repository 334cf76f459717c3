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
  // app (primary shard0): app.users sharded over both shards, app.orders unsharded on shard0, and
  // a copy of app.logs left on shard1; other (primary shard1) must be left alone.
  await cluster.shardedCollection({ ns: 'app.users', key: { uid: 1 }, owners: ['shard0', 'shard1'], splitPoints: [k(0)], documents: 5 });
  cluster.shards.shard0.storeUnsharded('app.orders', 2);
  cluster.shards.shard1.storeUnsharded('app.logs', 1);
  await cluster.database('other', 'shard1');
  cluster.shards.shard1.storeUnsharded('other.things', 1);
});
afterEach(async () => cluster.stop());

const PHASES = ['prepare', 'dropCollections', 'dropOnShards', 'removeMetadata'];

/** Nothing of app anywhere; other untouched. */
const DROPPED: ClusterState = {
  databases: ['other on shard1 (version 1)'],
  collections: {},
  changelog: ['dropCollection app.users', 'dropDatabase app'],
  coordinators: ['dropDatabase db:app: done'],
  locks: [],
  shards: { shard0: {}, shard1: { 'other.things': { key: { _id: 1 }, documents: 1, uuid: 'unsharded' } } },
};

const tableDrop = { node: SHARD_URLS.shard1, method: 'DELETE', path: /^\/internal\/collections\// };
const databaseDrop = { node: SHARD_URLS.shard0, method: 'DELETE', path: '/internal/databases/app' };

describe('dropDatabase', () => {
  it('drops its sharded collections one by one, then whatever the shards store of it, then its catalog entry', async () => {
    const config = await cluster.leader();
    await expect(config.databases.dropDatabase({ db: 'app' })).resolves.toEqual({ dropped: true });
    expect(config.coordinators.ran).toEqual(PHASES);
    expect(await cluster.state()).toEqual(DROPPED);
  });

  // prepare only reads the catalog: it has no retryable fault of its own (a leader dying there is below).
  it.each<{ phase: string; fault: string; inject: () => unknown }>([
    {
      phase: 'dropCollections',
      fault: "shard1's drop of app.users times out",
      inject: () => cluster.network.failNth({ ...tableDrop, fault: 'timeout' }),
    },
    {
      phase: 'dropOnShards',
      fault: "shard0's drop of the database times out",
      inject: () => cluster.network.failNth({ ...databaseDrop, fault: 'timeout' }),
    },
    {
      phase: 'removeMetadata',
      fault: 'removing the catalog entry is a serialization failure',
      inject: () => cluster.failNextStatement('databases', 'DELETE', 'transient'),
    },
  ])('retries $phase when $fault, and ends as a clean run does', async ({ phase, inject }) => {
    const config = await cluster.leader();
    await inject();
    await expect(config.databases.dropDatabase({ db: 'app' })).resolves.toEqual({ dropped: true });
    expect(config.coordinators.ran).toEqual(PHASES.flatMap((p) => (p === phase ? [p, p] : [p])));
    expect(await cluster.state()).toEqual(DROPPED);
  });

  it.each(PHASES)(
    'a leader that dies after the work of %s leaves the coordinator there, and the next leader repeats it to a clean end',
    async (phase) => {
      const dying = await cluster.leader();
      const crashed = dying.coordinators.crashAfter(phase);
      void dying.databases.dropDatabase({ db: 'app' });
      await crashed;
      expect(await cluster.coordinator()).toEqual({ kind: 'dropDatabase', phase, leader_term: dying.term });

      const next = await cluster.leader();
      await cluster.settled();
      expect(next.coordinators.ran).toEqual(PHASES.slice(PHASES.indexOf(phase)));
      expect(await cluster.state()).toEqual(DROPPED);
    },
  );

  it.each<{ phase: string; failure: string; inject: () => unknown; error: RegExp }>([
    {
      phase: 'dropCollections',
      failure: 'a shard refuses to drop app.users',
      inject: () => cluster.network.failNth({ ...tableDrop, fault: new TesseraError('INTERNAL', 'disk failure') }),
      error: /^INTERNAL disk failure$/,
    },
    {
      phase: 'dropOnShards',
      failure: 'a shard refuses to drop the database',
      inject: () => cluster.network.failNth({ ...databaseDrop, fault: new TesseraError('INTERNAL', 'disk failure') }),
      error: /^INTERNAL disk failure$/,
    },
    {
      phase: 'removeMetadata',
      failure: 'removing the catalog entry fails for good',
      inject: () => cluster.failNextStatement('databases', 'DELETE', 'permanent'),
      error: /injected permanent fault/,
    },
  ])(
    'fails in $phase when $failure, keeping the database in the catalog and releasing its locks; a retry finishes',
    async ({ inject, error }) => {
      const config = await cluster.leader();
      await inject();
      expect(await failureOf(config.databases.dropDatabase({ db: 'app' }))).toMatch(error);
      const failed = await cluster.state();
      expect(failed.databases).toEqual(['app on shard0 (version 1)', 'other on shard1 (version 1)']);
      expect(failed.coordinators).toEqual([expect.stringMatching(/^dropDatabase db:app: failed/)]);
      expect(failed.locks).toEqual([]);

      await expect(config.databases.dropDatabase({ db: 'app' })).resolves.toEqual({ dropped: true });
      expect(await cluster.state()).toEqual({ ...DROPPED, coordinators: [...failed.coordinators, 'dropDatabase db:app: done'] });
    },
  );
});
