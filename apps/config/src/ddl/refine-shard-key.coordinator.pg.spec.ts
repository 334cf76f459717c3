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
  // app.users sharded by uid, split at 0 over both shards, 5 documents on each.
  await cluster.shardedCollection({ ns: 'app.users', key: { uid: 1 }, owners: ['shard0', 'shard1'], splitPoints: [k(0)], documents: 5 });
});
afterEach(async () => cluster.stop());

const PHASES = ['prepare', 'rekeyOnShards', 'commit'];
const refine = { ns: 'app.users', key: { uid: 1 as const, ts: 1 as const } };
const stored = (key: Record<string, 1>) => ({ key, documents: 5, uuid: 'catalog' as const });

const BEFORE: ClusterState = {
  databases: ['app on shard0 (version 1)'],
  collections: {
    'app.users': {
      key: { uid: 1 },
      unique: false,
      allowMigrations: true,
      chunks: ['MinKey → 0 on shard0 (1|0)', '0 → MaxKey on shard1 (1|1)'],
    },
  },
  changelog: [],
  coordinators: [],
  locks: [],
  shards: { shard0: { 'app.users': stored({ uid: 1 }) }, shard1: { 'app.users': stored({ uid: 1 }) } },
};

/** The new key in the catalog, the chunk bounds extended with MinKey (MaxKey after MaxKey), both shards re-keyed. */
const REFINED: ClusterState = {
  ...BEFORE,
  collections: {
    'app.users': {
      key: { uid: 1, ts: 1 },
      unique: false,
      allowMigrations: true,
      chunks: ['(MinKey, MinKey) → (0, MinKey) on shard0 (1|0)', '(0, MinKey) → (MaxKey, MaxKey) on shard1 (1|1)'],
    },
  },
  changelog: ['refineCollectionShardKey app.users'],
  coordinators: ['refineCollectionShardKey app.users: done'],
  shards: { shard0: { 'app.users': stored({ uid: 1, ts: 1 }) }, shard1: { 'app.users': stored({ uid: 1, ts: 1 }) } },
};

const shardRekey = { node: SHARD_URLS.shard1, path: /\/refine$/ };

describe('refineCollectionShardKey', () => {
  it('re-keys every owner, commits the new key and epoch with the chunks extended, and has the owners refresh', async () => {
    const config = await cluster.leader();
    await expect(config.collections.refineCollectionShardKey(refine)).resolves.toMatchObject({ key: refine.key, chunks: 2 });
    expect(config.coordinators.ran).toEqual(PHASES);
    expect(await cluster.state()).toEqual(REFINED);
    expect([cluster.shards.shard0.refreshed, cluster.shards.shard1.refreshed]).toEqual([['app.users'], ['app.users']]);
  });

  it('commits even when an owner does not refresh afterwards', async () => {
    const config = await cluster.leader();
    cluster.network.failNth({ node: SHARD_URLS.shard1, path: '/internal/data/refreshMetadata', fault: 'unreachable' });
    await config.collections.refineCollectionShardKey(refine);
    expect(config.coordinators.ran).toEqual(PHASES);
    expect(await cluster.state()).toEqual(REFINED);
  });

  it.each<{ phase: string; fault: string; inject: () => unknown }>([
    {
      phase: 'prepare',
      fault: 'stopping migrations is a serialization failure',
      inject: () => cluster.failNextStatement('collections', 'UPDATE', 'transient'),
    },
    {
      phase: 'rekeyOnShards',
      fault: "shard1's re-key times out",
      inject: () => cluster.network.failNth({ ...shardRekey, fault: 'timeout' }),
    },
    {
      phase: 'commit',
      fault: 'replacing the chunks is a serialization failure',
      inject: () => cluster.failNextStatement('chunks', 'DELETE', 'transient'),
    },
  ])('retries $phase when $fault, and ends as a clean run does', async ({ phase, inject }) => {
    const config = await cluster.leader();
    await inject();
    await config.collections.refineCollectionShardKey(refine);
    expect(config.coordinators.ran).toEqual(PHASES.flatMap((p) => (p === phase ? [p, p] : [p])));
    expect(await cluster.state()).toEqual(REFINED);
  });

  it.each(PHASES)(
    'a leader that dies after the work of %s leaves the coordinator there, and the next leader repeats it to a clean end',
    async (phase) => {
      const dying = await cluster.leader();
      const crashed = dying.coordinators.crashAfter(phase);
      void dying.collections.refineCollectionShardKey(refine);
      await crashed;
      expect(await cluster.coordinator()).toEqual({ kind: 'refineCollectionShardKey', phase, leader_term: dying.term });

      const next = await cluster.leader();
      await cluster.settled();
      expect(next.coordinators.ran).toEqual(PHASES.slice(PHASES.indexOf(phase)));
      expect(await cluster.state()).toEqual(REFINED);
    },
  );

  const failed = (code: string) => [`refineCollectionShardKey app.users: failed (${code})`];

  it.each<{ phase: string; failure: string; request?: typeof refine; inject: () => unknown; error: RegExp; end: ClusterState }>([
    {
      phase: 'prepare',
      failure: 'the new key does not extend the current one',
      request: { ns: 'app.users', key: { ts: 1, uid: 1 } as unknown as typeof refine.key },
      inject: () => undefined,
      error: /^BAD_VALUE /,
      end: { ...BEFORE, coordinators: failed('BAD_VALUE') },
    },
    {
      // shard0 keeps its documents keyed by the refined key: the old chunk bounds order them the
      // same way (README, "refineCollectionShardKey"), and a later refine re-keys from the documents.
      phase: 'rekeyOnShards',
      failure: 'a document on shard1 cannot take the new key',
      inject: () => cluster.network.failNth({ ...shardRekey, fault: new TesseraError('BAD_VALUE', 'a document has an array for ts') }),
      error: /^BAD_VALUE a document has an array for ts$/,
      end: {
        ...BEFORE,
        coordinators: failed('BAD_VALUE'),
        shards: { ...BEFORE.shards, shard0: { 'app.users': stored({ uid: 1, ts: 1 }) } },
      },
    },
    {
      phase: 'commit',
      failure: 'replacing the chunks fails for good',
      inject: () => cluster.failNextStatement('chunks', 'DELETE', 'permanent'),
      error: /injected permanent fault/,
      end: { ...BEFORE, coordinators: failed('INTERNAL'), shards: REFINED.shards },
    },
  ])(
    'fails in $phase when $failure, with migrations allowed again, its locks released and the catalog unchanged',
    async ({ request, inject, error, end }) => {
      const config = await cluster.leader();
      await inject();
      expect(await failureOf(config.collections.refineCollectionShardKey(request ?? refine))).toMatch(error);
      expect(await cluster.state()).toEqual(end);
    },
  );

  it('fails in prepare when the collection is not sharded', async () => {
    const config = await cluster.leader();
    expect(await failureOf(config.collections.refineCollectionShardKey({ ns: 'app.nothing', key: refine.key }))).toMatch(
      /^NAMESPACE_NOT_FOUND /,
    );
    expect(await cluster.state()).toEqual({
      ...BEFORE,
      coordinators: ['refineCollectionShardKey app.nothing: failed (NAMESPACE_NOT_FOUND)'],
    });
  });
});
