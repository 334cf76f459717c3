import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type TestDatabase, createTestDatabase } from '../../../../test/pg/test-database.js';
import { type ClusterState, DdlCluster, SHARD_URLS, failureOf } from '../../../../test/pg/ddl-cluster.js';

let db: TestDatabase;
let cluster: DdlCluster;

beforeAll(async () => {
  db = await createTestDatabase('config');
});
afterAll(async () => db?.drop());
beforeEach(async () => {
  cluster = await DdlCluster.start(db.dataSource);
  // app's primary is shard0, which stores only its sharded collection app.users.
  await cluster.shardedCollection({ ns: 'app.users', key: { uid: 1 }, owners: ['shard0'], documents: 5 });
});
afterEach(async () => cluster.stop());

const PHASES = ['prepare', 'commit'];
const move = { db: 'app', to: 'shard1' };

const BEFORE: Omit<ClusterState, 'coordinators'> = {
  databases: ['app on shard0 (version 1)'],
  collections: { 'app.users': { key: { uid: 1 }, unique: false, allowMigrations: true, chunks: ['MinKey → MaxKey on shard0 (1|0)'] } },
  changelog: [],
  locks: [],
  shards: { shard0: { 'app.users': { key: { uid: 1 }, documents: 5, uuid: 'catalog' } }, shard1: {} },
};

/** The primary on shard1 at the next database version; the sharded collection stays where its chunks are. */
const MOVED: ClusterState = {
  ...BEFORE,
  databases: ['app on shard1 (version 2)'],
  changelog: ['movePrimary app'],
  coordinators: ['movePrimary db:app: done'],
};

describe('movePrimary', () => {
  it('moves the primary in the catalog, bumping the database version', async () => {
    const config = await cluster.leader();
    await expect(config.databases.movePrimary(move)).resolves.toMatchObject({
      name: 'app',
      primaryShard: 'shard1',
      version: { lastMod: 2 },
    });
    expect(config.coordinators.ran).toEqual(PHASES);
    expect(await cluster.state()).toEqual(MOVED);
  });

  it('changes nothing when the shard is already the primary', async () => {
    const config = await cluster.leader();
    await expect(config.databases.movePrimary({ db: 'app', to: 'shard0' })).resolves.toMatchObject({ primaryShard: 'shard0' });
    expect(await cluster.state()).toEqual({ ...BEFORE, coordinators: ['movePrimary db:app: done'] });
  });

  it.each<{ phase: string; fault: string; inject: () => unknown }>([
    {
      phase: 'prepare',
      fault: "the primary's list of the database's collections times out",
      inject: () => cluster.network.failNth({ node: SHARD_URLS.shard0, path: '/internal/databases/app/namespaces', fault: 'timeout' }),
    },
    {
      phase: 'commit',
      fault: 'the catalog update is a serialization failure',
      inject: () => cluster.failNextStatement('databases', 'UPDATE', 'transient'),
    },
  ])('retries $phase when $fault, and ends as a clean run does', async ({ phase, inject }) => {
    const config = await cluster.leader();
    await inject();
    await config.databases.movePrimary(move);
    expect(config.coordinators.ran).toEqual(PHASES.flatMap((p) => (p === phase ? [p, p] : [p])));
    expect(await cluster.state()).toEqual(MOVED);
  });

  it.each(PHASES)(
    'a leader that dies after the work of %s leaves the coordinator there, and the next leader repeats it to a clean end',
    async (phase) => {
      const dying = await cluster.leader();
      const crashed = dying.coordinators.crashAfter(phase);
      void dying.databases.movePrimary(move);
      await crashed;
      expect(await cluster.coordinator()).toEqual({ kind: 'movePrimary', phase, leader_term: dying.term });

      const next = await cluster.leader();
      await cluster.settled();
      expect(next.coordinators.ran).toEqual(PHASES.slice(PHASES.indexOf(phase)));
      expect(await cluster.state()).toEqual(MOVED);
    },
  );

  it.each<{ phase: string; failure: string; request?: { db: string; to: string }; inject: () => unknown; error: RegExp; code: string }>([
    {
      phase: 'prepare',
      failure: 'the primary holds an unsharded collection',
      inject: () => cluster.shards.shard0.storeUnsharded('app.orders', 2),
      error: /^ILLEGAL_OPERATION .*unsharded collections \(app\.orders\)/,
      code: 'ILLEGAL_OPERATION',
    },
    {
      phase: 'prepare',
      failure: 'the target shard is draining',
      inject: () => db.dataSource.query("UPDATE shards SET state = 'draining' WHERE name = 'shard1'"),
      error: /^ILLEGAL_OPERATION .*draining/,
      code: 'ILLEGAL_OPERATION',
    },
    {
      phase: 'prepare',
      failure: 'there is no such shard',
      request: { db: 'app', to: 'shard9' },
      inject: () => undefined,
      error: /^SHARD_NOT_FOUND /,
      code: 'SHARD_NOT_FOUND',
    },
    {
      phase: 'commit',
      failure: 'the catalog update fails for good',
      inject: () => cluster.failNextStatement('databases', 'UPDATE', 'permanent'),
      error: /injected permanent fault/,
      code: 'INTERNAL',
    },
  ])('fails in $phase when $failure, releasing its locks and changing nothing', async ({ request, inject, error, code }) => {
    const config = await cluster.leader();
    await inject();
    const before = await cluster.state();
    expect(await failureOf(config.databases.movePrimary(request ?? move))).toMatch(error);
    expect(await cluster.state()).toEqual({ ...before, coordinators: [`movePrimary db:app: failed (${code})`] });
  });

  it('fails in prepare when the database does not exist', async () => {
    const config = await cluster.leader();
    expect(await failureOf(config.databases.movePrimary({ db: 'nothing', to: 'shard1' }))).toMatch(/^NAMESPACE_NOT_FOUND /);
    expect(await cluster.state()).toEqual({ ...BEFORE, coordinators: ['movePrimary db:nothing: failed (NAMESPACE_NOT_FOUND)'] });
  });
});
