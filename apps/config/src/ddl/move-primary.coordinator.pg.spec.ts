import { randomUUID } from 'node:crypto';
import { TesseraError } from '@tessera/core';
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
  // app's primary is shard0: it stores the sharded app.users (chunks only there) and the unsharded app.orders.
  await cluster.shardedCollection({ ns: 'app.users', key: { uid: 1 }, owners: ['shard0'], documents: 5 });
  cluster.shards.shard0.storeUnsharded('app.orders', 3);
});
afterEach(async () => cluster.stop());

const PHASES = ['prepare', 'clone', 'enterCriticalSection', 'commit', 'exitCriticalSection', 'clean'];
const move = { db: 'app', to: 'shard1' };

const USERS = { 'app.users': { key: { uid: 1 }, documents: 5, uuid: 'catalog' } } as const;
const ORDERS = { 'app.orders': { key: { _id: 1 }, documents: 3, uuid: 'unsharded' } } as const;

const BEFORE: Omit<ClusterState, 'coordinators'> = {
  databases: ['app on shard0 (version 1)'],
  collections: { 'app.users': { key: { uid: 1 }, unique: false, allowMigrations: true, chunks: ['MinKey → MaxKey on shard0 (1|0)'] } },
  changelog: [],
  locks: [],
  shards: { shard0: { ...ORDERS, ...USERS }, shard1: {} },
};

/** The primary on shard1 at the next database version with app.orders cloned there and gone from shard0; app.users stays where its chunks are. */
const MOVED: ClusterState = {
  ...BEFORE,
  databases: ['app on shard1 (version 2)'],
  changelog: ['movePrimary app'],
  coordinators: ['movePrimary db:app: done'],
  shards: { shard0: USERS, shard1: ORDERS },
};

async function until(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 25));
  expect(condition()).toBe(true);
}

/** No critical section is left on either shard. */
function sectionsLeft(): string[] {
  return Object.entries(cluster.shards).flatMap(([name, shard]) => [...shard.sections.keys()].map((db) => `${db} on ${name}`));
}

describe('movePrimary', () => {
  it('clones the unsharded collections to the new primary, moves it at the next database version, and drops them on the old one', async () => {
    const config = await cluster.leader();
    await expect(config.databases.movePrimary(move)).resolves.toMatchObject({
      name: 'app',
      primaryShard: 'shard1',
      version: { lastMod: 2 },
    });
    expect(config.coordinators.ran).toEqual(PHASES);
    expect(await cluster.state()).toEqual(MOVED);
    expect(sectionsLeft()).toEqual([]);
    // Writes were blocked before the clone, reads too before the commit, both released after it.
    const sectionCalls = cluster.network.callsTo(/CriticalSection$/, SHARD_URLS.shard0).map((c) => [c.path.split('/').at(-1), c.body]);
    expect(sectionCalls).toEqual([
      ['enterCriticalSection', { reason: expect.any(String), blockReads: false }],
      ['enterCriticalSection', { reason: expect.any(String), blockReads: true }],
      ['exitCriticalSection', { reason: expect.any(String) }],
    ]);
    const changelog: Array<{ details: unknown }> = await db.dataSource.query("SELECT details FROM changelog WHERE what = 'movePrimary'");
    expect(changelog[0]!.details).toEqual({ from: 'shard0', to: 'shard1', collections: ['app.orders'], documents: 3 });
  });

  it('drops unsharded collections the new primary held from an earlier time as primary: only the primary holds live ones', async () => {
    cluster.shards.shard1.storeUnsharded('app.leftover', 2);
    const config = await cluster.leader();
    await config.databases.movePrimary(move);
    expect(await cluster.state()).toEqual(MOVED);
  });

  it('changes nothing when the shard is already the primary', async () => {
    const config = await cluster.leader();
    await expect(config.databases.movePrimary({ db: 'app', to: 'shard0' })).resolves.toMatchObject({ primaryShard: 'shard0' });
    expect(await cluster.state()).toEqual({ ...BEFORE, coordinators: ['movePrimary db:app: done'] });
    expect(cluster.network.callsTo(/CriticalSection$/)).toEqual([]);
  });

  it.each<{ phase: string; fault: string; inject: () => unknown }>([
    {
      phase: 'clone',
      fault: "the recipient's clone times out",
      inject: () =>
        cluster.network.failNth({ node: SHARD_URLS.shard1, path: '/internal/databases/app/cloneCatalogData', fault: 'timeout' }),
    },
    {
      phase: 'enterCriticalSection',
      fault: 'the donor is unreachable',
      inject: () =>
        cluster.network.failNth({
          node: SHARD_URLS.shard0,
          path: '/internal/databases/app/enterCriticalSection',
          nth: 2,
          fault: 'unreachable',
        }),
    },
    {
      phase: 'commit',
      fault: 'the catalog update is a serialization failure',
      inject: () => cluster.failNextStatement('databases', 'UPDATE', 'transient'),
    },
    {
      phase: 'clean',
      fault: "the donor's drop times out",
      inject: () => cluster.network.failNth({ node: SHARD_URLS.shard0, path: '/internal/databases/app/dropStaleData', fault: 'timeout' }),
    },
  ])('retries $phase when $fault, and ends as a clean run does', async ({ phase, inject }) => {
    const config = await cluster.leader();
    await inject();
    await config.databases.movePrimary(move);
    expect(config.coordinators.ran).toEqual(PHASES.flatMap((p) => (p === phase ? [p, p] : [p])));
    expect(await cluster.state()).toEqual(MOVED);
    expect(sectionsLeft()).toEqual([]);
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
      expect(sectionsLeft()).toEqual([]);
    },
  );

  it.each<{ phase: string; failure: string; request?: { db: string; to: string }; inject: () => unknown; error: RegExp; code: string }>([
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
      phase: 'clone',
      failure: 'the recipient cannot build a collection',
      inject: () =>
        cluster.network.failNth({
          node: SHARD_URLS.shard1,
          path: '/internal/databases/app/cloneCatalogData',
          fault: new TesseraError('BAD_VALUE', 'injected: an index the recipient cannot build'),
        }),
      error: /^BAD_VALUE injected/,
      code: 'BAD_VALUE',
    },
    {
      phase: 'commit',
      failure: 'the catalog update fails for good',
      inject: () => cluster.failNextStatement('databases', 'UPDATE', 'permanent'),
      error: /injected permanent fault/,
      code: 'INTERNAL',
    },
  ])(
    'fails in $phase when $failure, releasing its locks and its critical section and changing nothing',
    async ({ request, inject, error, code }) => {
      const config = await cluster.leader();
      await inject();
      const before = await cluster.state();
      expect(await failureOf(config.databases.movePrimary(request ?? move))).toMatch(error);
      expect(await cluster.state()).toEqual({ ...before, coordinators: [`movePrimary db:app: failed (${code})`] });
      expect(sectionsLeft()).toEqual([]);
    },
  );

  it("a failure after the commit releases the section but keeps the new primary's data", async () => {
    const config = await cluster.leader();
    cluster.network.failNth({
      node: SHARD_URLS.shard0,
      path: '/internal/databases/app/dropStaleData',
      fault: new TesseraError('ILLEGAL_OPERATION', 'injected: the donor refuses its drop'),
    });
    expect(await failureOf(config.databases.movePrimary(move))).toMatch(/^ILLEGAL_OPERATION injected/);
    const state = await cluster.state();
    expect(state.databases).toEqual(['app on shard1 (version 2)']);
    expect(state.shards.shard1).toEqual(ORDERS);
    expect(sectionsLeft()).toEqual([]);
  });

  it("releases a section a failed movePrimary left on the donor (its cleanup could not reach it), but not a running one's", async () => {
    cluster.shards.shard0.sections.set('app', { reason: randomUUID(), blocksReads: true });
    const config = await cluster.leader();
    await config.databases.movePrimary(move);
    expect(await cluster.state()).toEqual(MOVED);
    expect(sectionsLeft()).toEqual([]);

    // A reason the catalog knows as unfinished is a real conflict: retried, never taken over.
    const running = randomUUID();
    await db.dataSource.query(
      "INSERT INTO ddl_coordinators (id, kind, resource, phase, request, leader_term) VALUES ($1, 'movePrimary', 'db:elsewhere', 'clone', '{}', 1)",
      [running],
    );
    cluster.shards.shard1.sections.set('app', { reason: running, blocksReads: false });
    const back = config.databases.movePrimary({ db: 'app', to: 'shard0' });
    await until(() => cluster.network.callsTo('/internal/databases/app/enterCriticalSection', SHARD_URLS.shard1).length >= 2);
    expect(cluster.shards.shard1.sections.get('app')?.reason).toBe(running);
    await db.dataSource.query("UPDATE ddl_coordinators SET phase = 'failed' WHERE id = $1", [running]);
    await back;
    expect(sectionsLeft()).toEqual([]);
    expect((await cluster.state()).databases).toEqual(['app on shard0 (version 3)']);
  });

  it('fails in prepare when the database does not exist', async () => {
    const config = await cluster.leader();
    expect(await failureOf(config.databases.movePrimary({ db: 'nothing', to: 'shard1' }))).toMatch(/^NAMESPACE_NOT_FOUND /);
    expect(await cluster.state()).toEqual({ ...BEFORE, coordinators: ['movePrimary db:nothing: failed (NAMESPACE_NOT_FOUND)'] });
  });
});
