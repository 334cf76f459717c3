import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { TesseraError } from '@tessera/core';
import type { ShardCollectionRequest } from '@tessera/protocol';
import type { FakeFault } from '../../../../test/fakes/fake-network.js';
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
});
afterEach(async () => cluster.stop());

const PHASES = ['prepare', 'createOnShards', 'commit', 'rekeyAfterCommit'];

/** Two ways to shard app.users: a new collection with a hashed key, or the existing unsharded one of shard0. */
const scenarios = {
  new: {
    request: { ns: 'app.users', key: { uid: 'hashed' }, unique: false } as ShardCollectionRequest,
    setup: async () => undefined,
  },
  existing: {
    request: { ns: 'app.users', key: { uid: 1 }, unique: false } as ShardCollectionRequest,
    setup: async () => {
      await cluster.database('app', 'shard0');
      cluster.shards.shard0.storeUnsharded('app.users', 3);
    },
  },
};
type Scenario = keyof typeof scenarios;

/** A new hashed collection: its database created on the least loaded shard, four chunks over both shards, a table on each. */
const SHARDED_NEW: ClusterState = {
  databases: ['app on shard0 (version 1)'],
  collections: {
    'app.users': {
      key: { uid: 'hashed' },
      unique: false,
      allowMigrations: true,
      chunks: [
        'MinKey → -4611686018427387904 on shard0 (1|0)',
        '-4611686018427387904 → 0 on shard1 (1|1)',
        '0 → 4611686018427387904 on shard0 (1|2)',
        '4611686018427387904 → MaxKey on shard1 (1|3)',
      ],
    },
  },
  changelog: ['createDatabase app', 'shardCollection.end app.users'],
  coordinators: ['shardCollection app.users: done'],
  locks: [],
  shards: {
    shard0: { 'app.users': { key: { uid: 'hashed' }, documents: 0, uuid: 'catalog' } },
    shard1: { 'app.users': { key: { uid: 'hashed' }, documents: 0, uuid: 'catalog' } },
  },
};

/** The existing collection adopted under its uuid: one chunk on its primary shard, its documents re-keyed in place. */
const SHARDED_EXISTING: ClusterState = {
  databases: ['app on shard0 (version 1)'],
  collections: {
    'app.users': { key: { uid: 1 }, unique: false, allowMigrations: true, chunks: ['MinKey → MaxKey on shard0 (1|0)'] },
  },
  changelog: ['shardCollection.end app.users'],
  coordinators: ['shardCollection app.users: done'],
  locks: [],
  shards: { shard0: { 'app.users': { key: { uid: 1 }, documents: 3, uuid: 'catalog' } }, shard1: {} },
};

const cleanEnd: Record<Scenario, ClusterState> = { new: SHARDED_NEW, existing: SHARDED_EXISTING };

/** A timeout of the nth call to a shard route. */
const timeout = (matcher: { node?: string; method?: string; path: RegExp; nth?: number }) => () =>
  cluster.network.failNth({ ...matcher, fault: 'timeout' as FakeFault });

describe('shardCollection', () => {
  it('shards a new collection with a hashed key: its database, four chunks over both shards, a table on each', async () => {
    const config = await cluster.leader();
    const result = await config.collections.shardCollection(scenarios.new.request);
    expect(result).toMatchObject({ ns: 'app.users', key: { uid: 'hashed' }, chunks: 4, shards: ['shard0', 'shard1'] });
    expect(config.coordinators.ran).toEqual(PHASES);
    expect(await cluster.state()).toEqual(SHARDED_NEW);
  });

  it('adopts an existing unsharded collection under its uuid, re-keying its documents before and after the commit', async () => {
    await scenarios.existing.setup();
    const config = await cluster.leader();
    const result = await config.collections.shardCollection(scenarios.existing.request);
    expect(result).toMatchObject({ ns: 'app.users', chunks: 1, shards: ['shard0'] });
    expect(cluster.network.callsTo(/\/refine$/, SHARD_URLS.shard0)).toHaveLength(2);
    expect(await cluster.state()).toEqual(SHARDED_EXISTING);
  });

  it.each<{ phase: string; scenario: Scenario; fault: string; inject: () => unknown }>([
    {
      phase: 'prepare',
      scenario: 'new',
      fault: "the primary's answer about an existing collection times out",
      inject: timeout({ path: /^\/internal\/namespaces\// }),
    },
    {
      phase: 'createOnShards',
      scenario: 'new',
      fault: "shard1's createCollection times out",
      inject: timeout({ node: SHARD_URLS.shard1, method: 'PUT', path: /^\/internal\/collections\// }),
    },
    {
      phase: 'commit',
      scenario: 'new',
      fault: 'the catalog insert is a serialization failure',
      inject: () => cluster.failNextStatement('collections', 'INSERT', 'transient'),
    },
    {
      phase: 'rekeyAfterCommit',
      scenario: 'existing',
      fault: 'the second re-key times out',
      inject: timeout({ path: /\/refine$/, nth: 2 }),
    },
  ])('retries $phase ($scenario collection) when $fault, and ends as a clean run does', async ({ phase, scenario, inject }) => {
    await scenarios[scenario].setup();
    const config = await cluster.leader();
    await inject();
    await config.collections.shardCollection(scenarios[scenario].request);
    expect(config.coordinators.ran).toEqual(PHASES.flatMap((p) => (p === phase ? [p, p] : [p])));
    expect(await cluster.state()).toEqual(cleanEnd[scenario]);
  });

  it.each<{ phase: string; scenario: Scenario }>([
    { phase: 'prepare', scenario: 'new' },
    { phase: 'createOnShards', scenario: 'new' },
    { phase: 'commit', scenario: 'new' },
    { phase: 'rekeyAfterCommit', scenario: 'new' },
    // Adopting differs from a new collection in what createOnShards and rekeyAfterCommit do.
    { phase: 'createOnShards', scenario: 'existing' },
    { phase: 'rekeyAfterCommit', scenario: 'existing' },
  ])(
    'a leader that dies after the work of $phase ($scenario collection) leaves the coordinator there, and the next leader repeats it to a clean end',
    async ({ phase, scenario }) => {
      await scenarios[scenario].setup();
      const dying = await cluster.leader();
      const crashed = dying.coordinators.crashAfter(phase);
      void dying.collections.shardCollection(scenarios[scenario].request);
      await crashed;
      expect(await cluster.coordinator()).toEqual({ kind: 'shardCollection', phase, leader_term: dying.term });

      const next = await cluster.leader();
      await cluster.settled();
      expect(next.coordinators.ran).toEqual(PHASES.slice(PHASES.indexOf(phase)));
      expect(await cluster.state()).toEqual(cleanEnd[scenario]);
    },
  );

  it('a deposed leader that wakes up inside commit after the next leader finished writes nothing, and answers NOT_LEADER', async () => {
    const deposed = await cluster.leader();
    const paused = deposed.coordinators.hold('commit', 'before');
    const answer = failureOf(deposed.collections.shardCollection(scenarios.new.request));
    await paused.reached;
    await cluster.leader();
    await cluster.settled();

    paused.release();
    expect(await answer).toMatch(/^NOT_LEADER /);
    expect(deposed.coordinators.ran).toEqual(['prepare', 'createOnShards', 'commit']);
    expect(await cluster.state()).toEqual(SHARDED_NEW);
  });

  it('joins an identical request to the running coordinator and refuses a different one with CONFLICTING_OPERATION', async () => {
    const config = await cluster.leader();
    const paused = config.coordinators.hold('createOnShards', 'before');
    const first = config.collections.shardCollection(scenarios.new.request);
    await paused.reached;
    const second = config.collections.shardCollection(scenarios.new.request);
    expect(await failureOf(config.collections.shardCollection(scenarios.existing.request))).toMatch(/^CONFLICTING_OPERATION /);

    paused.release();
    const [a, b] = await Promise.all([first, second]);
    expect(b).toEqual(a);
    expect(config.coordinators.ran).toEqual(PHASES);
    expect(await cluster.state()).toEqual(SHARDED_NEW);
  });

  /** After a failure: the database that prepare created stays (as enableSharding leaves it), and nothing else. */
  const failedWithDatabase = (code: string): ClusterState => ({
    databases: ['app on shard0 (version 1)'],
    collections: {},
    changelog: ['createDatabase app'],
    coordinators: [`shardCollection app.users: failed (${code})`],
    locks: [],
    shards: { shard0: {}, shard1: {} },
  });

  it.each<{
    phase: string;
    failure: string;
    scenario: Scenario;
    request?: ShardCollectionRequest;
    inject: () => unknown;
    error: RegExp;
    end: ClusterState;
  }>([
    {
      phase: 'prepare',
      failure: 'a hashed key cannot be unique',
      scenario: 'new',
      request: { ns: 'app.users', key: { uid: 'hashed' }, unique: true },
      inject: () => undefined,
      error: /BAD_VALUE/,
      end: {
        databases: [],
        collections: {},
        changelog: [],
        coordinators: ['shardCollection app.users: failed (BAD_VALUE)'],
        locks: [],
        shards: { shard0: {}, shard1: {} },
      },
    },
    {
      phase: 'prepare',
      failure: 'an existing collection cannot take a unique key',
      scenario: 'existing',
      request: { ns: 'app.users', key: { uid: 1 }, unique: true },
      inject: () => undefined,
      error: /ILLEGAL_OPERATION/,
      end: {
        ...SHARDED_EXISTING,
        collections: {},
        changelog: [],
        coordinators: ['shardCollection app.users: failed (ILLEGAL_OPERATION)'],
        shards: { shard0: { 'app.users': { key: { _id: 1 }, documents: 3, uuid: 'unsharded' } }, shard1: {} },
      },
    },
    {
      phase: 'createOnShards',
      failure: 'the primary shard refuses createCollection while shard1 creates its table',
      scenario: 'new',
      inject: () =>
        cluster.network.failNth({
          node: SHARD_URLS.shard0,
          method: 'PUT',
          path: /^\/internal\/collections\//,
          fault: new TesseraError('INTERNAL', 'disk full'),
        }),
      error: /INTERNAL/,
      end: failedWithDatabase('INTERNAL'),
    },
    {
      phase: 'commit',
      failure: 'the catalog insert fails for good',
      scenario: 'new',
      inject: () => cluster.failNextStatement('collections', 'INSERT', 'permanent'),
      error: /injected permanent fault/,
      end: failedWithDatabase('INTERNAL'),
    },
    {
      phase: 'rekeyAfterCommit',
      failure: 'the second re-key is refused: the commit stands, and the adopted documents stay',
      scenario: 'existing',
      inject: () =>
        cluster.network.failNth({ path: /\/refine$/, nth: 2, fault: new TesseraError('BAD_VALUE', 'a document has an array for uid') }),
      error: /BAD_VALUE/,
      end: { ...SHARDED_EXISTING, coordinators: ['shardCollection app.users: failed (BAD_VALUE)'] },
    },
  ])(
    'fails in $phase when $failure, releasing its locks and leaving nothing half-done',
    async ({ scenario, request, inject, error, end }) => {
      await scenarios[scenario].setup();
      const config = await cluster.leader();
      await inject();
      expect(await failureOf(config.collections.shardCollection(request ?? scenarios[scenario].request))).toMatch(error);
      expect(await cluster.state()).toEqual(end);
    },
  );

  it('can be run again after a shard refused to create the collection', async () => {
    const config = await cluster.leader();
    cluster.network.failNth({
      node: SHARD_URLS.shard0,
      method: 'PUT',
      path: /^\/internal\/collections\//,
      fault: new TesseraError('INTERNAL', 'disk full'),
    });
    await expect(config.collections.shardCollection(scenarios.new.request)).rejects.toMatchObject({ code: 'INTERNAL' });
    await config.collections.shardCollection(scenarios.new.request);
    expect(await cluster.state()).toEqual({
      ...SHARDED_NEW,
      coordinators: ['shardCollection app.users: failed (INTERNAL)', 'shardCollection app.users: done'],
    });
  });
});
