import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RoutingTable } from '@tessera/core';
import { type GetChunksResult, chunkFromWire, shardKeyToWire } from '@tessera/protocol';
import { type TestDatabase, createTestDatabase } from '../../../../test/pg/test-database.js';
import { catalogServices, caught, k, wireRange } from './catalog-fixture.js';
import type { CatalogReadService } from './catalog-read.service.js';
import { seedShardedCollection } from './catalog-seed.js';
import type { MetadataCommitService } from './metadata-commit.service.js';

let db: TestDatabase;
let commits: MetadataCommitService;
let reads: CatalogReadService;

beforeAll(async () => {
  db = await createTestDatabase('config');
  ({ commits, reads } = catalogServices(db.dataSource));
});
afterAll(async () => db?.drop());

const tableOf = (result: GetChunksResult) => RoutingTable.fromChunks(result.chunks.map(chunkFromWire));

describe('getDatabase and getCollection', () => {
  it('return the catalog entries, the collection with its current version', async () => {
    const seeded = await seedShardedCollection(db.dataSource, {
      ns: 'app.users',
      shards: ['s0', 's1'],
      splitPoints: [k('eu', 0), k('us', 0)],
      keyPattern: { region: 1, id: 'hashed' },
    });
    expect(await reads.getDatabase('app')).toMatchObject({ name: 'app', primaryShard: 's0', version: { lastMod: 1 } });
    expect(await reads.getCollection('app.users')).toMatchObject({
      ns: 'app.users',
      uuid: seeded.uuid,
      epoch: seeded.generation.epoch,
      timestamp: seeded.generation.timestamp,
      keyPattern: { region: 1, id: 'hashed' },
      unique: false,
      maxChunkSizeBytes: null,
      allowMigrations: true,
      collectionVersion: { ...seeded.generation, major: 1, minor: 2 },
    });
  });

  it('answer NAMESPACE_NOT_FOUND for what does not exist', async () => {
    expect(await caught(() => reads.getDatabase('nodb'))).toMatchObject({ code: 'NAMESPACE_NOT_FOUND', details: { db: 'nodb' } });
    expect(await caught(() => reads.getCollection('nodb.x'))).toMatchObject({ code: 'NAMESPACE_NOT_FOUND', details: { ns: 'nodb.x' } });
  });
});

describe('getChunks', () => {
  it('returns every chunk in key order when no version is given, and they read back as written', async () => {
    const seeded = await seedShardedCollection(db.dataSource, { ns: 'r.full', shards: ['s0', 's1'], splitPoints: [k(-5), k(3.5), k('a')] });
    const result = await reads.getChunks({ ns: 'r.full' });
    expect(result).toMatchObject({
      full: true,
      uuid: seeded.uuid,
      keyPattern: { x: 1 },
      collectionVersion: { ...seeded.generation, major: 1, minor: 3 },
    });
    expect(result.chunks.map(chunkFromWire)).toEqual(seeded.chunks);
  });

  it('returns nothing new for the current version, and everything for another generation', async () => {
    await seedShardedCollection(db.dataSource, { ns: 'r.same', shards: ['s0'], splitPoints: [k(1)] });
    const { collectionVersion } = await reads.getChunks({ ns: 'r.same' });
    expect(await reads.getChunks({ ns: 'r.same', sinceVersion: collectionVersion })).toMatchObject({
      full: false,
      chunks: [],
      collectionVersion,
    });
    const other = { ...collectionVersion, epoch: 'ffffffffffffffffffffff00' };
    const full = await reads.getChunks({ ns: 'r.same', sinceVersion: other });
    expect(full.full).toBe(true);
    expect(full.chunks).toHaveLength(2);
  });

  it('refuses an unknown namespace and a malformed version', async () => {
    expect((await caught(() => reads.getChunks({ ns: 'r.none' }))).code).toBe('NAMESPACE_NOT_FOUND');
    const error = await caught(() => reads.getChunks({ ns: 'r.same', sinceVersion: { epoch: 'x', major: 1 } as never }));
    expect(error.code).toBe('BAD_VALUE');
    expect(error.message).toContain('sinceVersion.epoch');
  });

  it('an incremental result applied to the previous table equals a full rebuild after a split, a merge and a migration', async () => {
    await seedShardedCollection(db.dataSource, {
      ns: 'r.incr',
      shards: ['s0', 's1', 's2'],
      splitPoints: [0, 10, 20, 30, 40, 50].map((p) => k(p)),
    });
    let cached = await reads.getChunks({ ns: 'r.incr' });
    let table = tableOf(cached);
    const steps: Array<(cv: GetChunksResult['collectionVersion']) => Promise<unknown>> = [
      // [0, 10) is on s1: split it twice.
      (cv) =>
        commits.commitSplit({
          ns: 'r.incr',
          shard: 's1',
          range: wireRange(0, 10),
          splitPoints: [shardKeyToWire(k(3)), shardKeyToWire(k(6))],
          expectedCollectionVersion: cv,
        }),
      // The pieces [0,3) [3,6) are contiguous on s1: merge them.
      (cv) => commits.commitMerge({ ns: 'r.incr', shard: 's1', range: wireRange(0, 6), expectedCollectionVersion: cv }),
      // Move [20, 30) (on s0) to s2; s0 keeps a control chunk.
      (cv) =>
        commits.commitMigration({ ns: 'r.incr', range: wireRange(20, 30), donor: 's0', recipient: 's2', expectedCollectionVersion: cv }),
    ];
    for (const step of steps) {
      await step(cached.collectionVersion);
      const delta = await reads.getChunks({ ns: 'r.incr', sinceVersion: cached.collectionVersion });
      expect(delta.full).toBe(false);
      expect(delta.chunks.length).toBeLessThanOrEqual(3);
      const incremental = table.applyChanges(delta.chunks.map(chunkFromWire));
      const full = await reads.getChunks({ ns: 'r.incr' });
      const rebuilt = tableOf(full);
      expect(incremental.chunks()).toEqual(rebuilt.chunks());
      expect(incremental.shardVersions()).toEqual(rebuilt.shardVersions());
      expect(incremental.collectionVersion).toEqual(delta.collectionVersion);
      expect(delta.collectionVersion).toEqual(full.collectionVersion);
      cached = delta;
      table = incremental;
    }
    expect(table.size).toBe(8);
  });

  it('reads the changed chunks through the version index', async () => {
    const seeded = await seedShardedCollection(db.dataSource, {
      ns: 'r.plan',
      shards: ['s0'],
      splitPoints: Array.from({ length: 5000 }, (_, i) => k(i)),
    });
    await db.dataSource.query('ANALYZE chunks');
    const plan: Array<{ 'QUERY PLAN': string }> = await db.dataSource.query(
      'EXPLAIN SELECT * FROM chunks WHERE collection_uuid = $1 AND (major, minor) > ($2, $3) ORDER BY min',
      [seeded.uuid, 1, 4990],
    );
    expect(plan.map((p) => p['QUERY PLAN']).join('\n')).toContain('chunks_collection_version');
  });
});
