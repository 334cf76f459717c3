import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { type ChunkVersion, RoutingTable, encodeKey } from '@tessera/core';
import { type WireChunkRange, chunkFromWire, shardKeyToWire } from '@tessera/protocol';
import { type TestDatabase, createTestDatabase } from '../../../../test/pg/test-database.js';
import { catalogServices, caught, k, wireRange, withMajorMinor } from './catalog-fixture.js';
import type { CatalogReadService } from './catalog-read.service.js';
import { seedShardedCollection } from './catalog-seed.js';
import type { MetadataCommitService } from './metadata-commit.service.js';

let db: TestDatabase;
let commits: MetadataCommitService;
let reads: CatalogReadService;
let seq = 0;

beforeAll(async () => {
  db = await createTestDatabase('config');
  ({ commits, reads } = catalogServices(db.dataSource));
});
afterAll(async () => db?.drop());

/** A collection `d.cN` with chunks [MinKey,0) a, [0,10) b, [10,20) a, [20,30) a, [30,MaxKey) b at 1|0..1|4. */
async function collection(splitPoints = [0, 10, 20, 30], shards = ['a', 'b', 'a', 'a', 'b']) {
  const ns = `d.c${++seq}`;
  // Round-robin over `shards` gives each chunk the shard at its index.
  const seeded = await seedShardedCollection(db.dataSource, {
    ns,
    shards: [...new Set(shards)],
    splitPoints: splitPoints.map((p) => k(p)),
  });
  for (const [i, chunk] of seeded.chunks.entries()) {
    await db.dataSource.query('UPDATE chunks SET shard = $3, history = $4 WHERE collection_uuid = $1 AND minor = $2', [
      seeded.uuid,
      i,
      shards[i],
      JSON.stringify([{ validAfter: chunk.history[0]!.validAfter, shard: shards[i] }]),
    ]);
  }
  const cv = (await reads.getCollection(ns)).collectionVersion;
  return { ns, uuid: seeded.uuid, cv };
}

/** Everything a commit may write: chunk rows, changelog rows and the clock row. */
async function snapshot(uuid: string): Promise<unknown> {
  return {
    chunks: await db.dataSource.query('SELECT * FROM chunks WHERE collection_uuid = $1 ORDER BY min', [uuid]),
    changelog: await db.dataSource.query('SELECT count(*)::int AS n FROM changelog'),
    clock: await db.dataSource.query('SELECT * FROM vector_clock'),
  };
}

async function changelogOf(ns: string): Promise<Array<{ what: string; shard: string; details: Record<string, unknown> }>> {
  return db.dataSource.query('SELECT what, shard, details FROM changelog WHERE ns = $1 ORDER BY id', [ns]);
}

async function allChunks(ns: string) {
  return (await reads.getChunks({ ns })).chunks.map(chunkFromWire);
}

/** Runs a commit that must fail, and checks that it changed nothing. */
async function refused(uuid: string, commit: () => Promise<unknown>) {
  const before = await snapshot(uuid);
  const error = await caught(commit);
  expect(await snapshot(uuid)).toEqual(before);
  return error;
}

const range = (min: number | 'min', max: number | 'max'): WireChunkRange => wireRange(min, max);
const pt = (n: number) => shardKeyToWire(k(n));

/** Registers a migration of [min, max) from a to b in active_migrations, as moveRange does; answers its id. */
async function activeMigration(ns: string, uuid: string, min: number, max: number, reason: string | null): Promise<string> {
  const id = randomUUID();
  await db.dataSource.query(
    `INSERT INTO active_migrations (id, ns, collection_uuid, min, max, min_ejson, max_ejson, donor, recipient, reason)
     VALUES ($1, $2, $3, $4, $5, $6, $7, 'a', 'b', $8)`,
    [
      id,
      ns,
      uuid,
      Buffer.from(encodeKey(k(min))),
      Buffer.from(encodeKey(k(max))),
      JSON.stringify(pt(min)),
      JSON.stringify(pt(max)),
      reason,
    ],
  );
  return id;
}

describe('commitSplit', () => {
  it('replaces the chunk by n+1 pieces <Mcv, mcv+k>, logs a multi-split naming the shard and ticks ConfigTime', async () => {
    const { ns, cv } = await collection();
    const clockBefore: Array<{ config_time_t: string; config_time_i: string }> = await db.dataSource.query('SELECT * FROM vector_clock');
    const result = await commits.commitSplit({
      ns,
      shard: 'a',
      range: range(10, 20),
      splitPoints: [pt(12), pt(15)],
      expectedCollectionVersion: cv,
    });
    expect(result.chunks.map((c) => [c.range, c.version.major, c.version.minor, c.shard])).toEqual([
      [range(10, 12), 1, 5, 'a'],
      [range(12, 15), 1, 6, 'a'],
      [range(15, 20), 1, 7, 'a'],
    ]);
    expect(result.collectionVersion).toEqual(withMajorMinor(cv, 1, 7));
    expect((await reads.getCollection(ns)).collectionVersion).toEqual(result.collectionVersion);
    const chunks = await allChunks(ns);
    expect(chunks).toHaveLength(7);
    expect(() => RoutingTable.fromChunks(chunks)).not.toThrow();
    const log = await changelogOf(ns);
    expect(log).toHaveLength(1);
    expect(log[0]).toMatchObject({
      what: 'multi-split',
      shard: 'a',
      details: { pieces: 3, before: { range: range(10, 20), version: '1|2' } },
    });
    const before = clockBefore[0]!;
    const t = result.configTime;
    expect(t.t > Number(before.config_time_t) || (t.t === Number(before.config_time_t) && t.i > Number(before.config_time_i))).toBe(true);
  });

  it('logs a split into two pieces as "split"', async () => {
    const { ns, cv } = await collection();
    await commits.commitSplit({ ns, shard: 'b', range: range(30, 'max'), splitPoints: [pt(1000)], expectedCollectionVersion: cv });
    expect((await changelogOf(ns)).map((e) => [e.what, e.shard])).toEqual([['split', 'b']]);
  });

  // Each case: the request's changes, the code and `details.problem` it must answer.
  const badSplits: Array<[string, Record<string, unknown>, string, string | undefined]> = [
    ['a split point below the chunk', { splitPoints: [pt(5)] }, 'BAD_VALUE', 'outsideChunk'],
    ['a split point above the chunk', { splitPoints: [pt(25)] }, 'BAD_VALUE', 'outsideChunk'],
    ['a split point equal to the min bound', { splitPoints: [pt(10)] }, 'BAD_VALUE', 'equalsBound'],
    ['a split point equal to the max bound', { splitPoints: [pt(20)] }, 'BAD_VALUE', 'equalsBound'],
    ['split points not increasing', { splitPoints: [pt(15), pt(12)] }, 'BAD_VALUE', 'notIncreasing'],
    ['a split point with two fields', { splitPoints: [shardKeyToWire(k(12, 1))] }, 'BAD_VALUE', 'arity'],
    ['a range that is not a chunk', { range: range(10, 15), splitPoints: [pt(12)] }, 'BAD_VALUE', 'notAChunk'],
    ['a range inside no chunk bound', { range: range(11, 20), splitPoints: [pt(12)] }, 'BAD_VALUE', 'notAChunk'],
    ['a chunk on another shard', { shard: 'b' }, 'BAD_VALUE', 'wrongShard'],
    ['an unknown namespace', { ns: 'd.nothere' }, 'NAMESPACE_NOT_FOUND', undefined],
    ['no split points', { splitPoints: [] }, 'BAD_VALUE', undefined],
    ['a malformed Extended JSON key', { splitPoints: [[{ $numberLong: 'x' }]] }, 'FAILED_TO_PARSE', undefined],
  ];
  it.each(badSplits)('refuses %s with a coded error and changes nothing', async (_, change, code, problem) => {
    const { ns, uuid, cv } = await collection();
    const error = await refused(uuid, () =>
      commits.commitSplit({ ns, shard: 'a', range: range(10, 20), splitPoints: [pt(15)], expectedCollectionVersion: cv, ...change }),
    );
    expect(error.code).toBe(code);
    if (problem !== undefined) expect(error.details).toMatchObject({ ns, problem });
    expect(error.message.length).toBeGreaterThan(20);
  });

  it('keeps the reason of the split in its changelog row', async () => {
    const { ns, cv } = await collection();
    await commits.commitSplit({
      ns,
      shard: 'a',
      range: range(10, 20),
      splitPoints: [pt(15)],
      expectedCollectionVersion: cv,
      reason: 'topChunk',
    });
    expect((await changelogOf(ns))[0]?.details).toMatchObject({ reason: 'topChunk' });
  });

  it('refuses to split a chunk being migrated with CONFLICTING_OPERATION, so the migration can still commit', async () => {
    const { ns, uuid, cv } = await collection();
    await activeMigration(ns, uuid, 10, 20, 'topChunk');
    const error = await refused(uuid, () =>
      commits.commitSplit({ ns, shard: 'a', range: range(10, 20), splitPoints: [pt(15)], expectedCollectionVersion: cv }),
    );
    expect(error).toMatchObject({ code: 'CONFLICTING_OPERATION', details: { ns, problem: 'migrating' } });
    // Another chunk splits.
    await commits.commitSplit({ ns, shard: 'a', range: range(20, 30), splitPoints: [pt(25)], expectedCollectionVersion: cv });
  });

  it('says which field and chunk were wrong', async () => {
    const { ns, cv } = await collection();
    const error = await caught(() =>
      commits.commitSplit({ ns, shard: 'a', range: range(10, 20), splitPoints: [pt(12), pt(20)], expectedCollectionVersion: cv }),
    );
    expect(error.message).toBe(`splitPoints[1] (20) equals the max bound of chunk [10, 20) of ${ns}.`);
    expect(error.details).toMatchObject({ field: 'splitPoints[1]', point: [20], range: range(10, 20) });
  });

  it('answers a stale expected version with a retryable CONFLICTING_OPERATION naming both versions', async () => {
    const { ns, uuid, cv } = await collection();
    const stale = withMajorMinor(cv, 1, 3);
    const error = await refused(uuid, () =>
      commits.commitSplit({ ns, shard: 'a', range: range(10, 20), splitPoints: [pt(15)], expectedCollectionVersion: stale }),
    );
    expect(error).toMatchObject({ code: 'CONFLICTING_OPERATION', retryable: true, details: { ns, expected: stale, current: cv } });
    const ahead = withMajorMinor(cv, 2, 0);
    expect(
      (
        await caught(() =>
          commits.commitSplit({ ns, shard: 'a', range: range(10, 20), splitPoints: [pt(15)], expectedCollectionVersion: ahead }),
        )
      ).code,
    ).toBe('CONFLICTING_OPERATION');
  });

  it('answers an expected version of another generation with STALE_EPOCH', async () => {
    const { ns, uuid, cv } = await collection();
    const other: ChunkVersion = { ...cv, epoch: 'ffffffffffffffffffffff00' };
    const error = await refused(uuid, () =>
      commits.commitSplit({ ns, shard: 'a', range: range(10, 20), splitPoints: [pt(15)], expectedCollectionVersion: other }),
    );
    expect(error).toMatchObject({ code: 'STALE_EPOCH', details: { expected: other, current: cv } });
  });
});

describe('commitMerge', () => {
  it('merges a run of contiguous chunks of one shard into <Mcv, mcv+1> with a fresh history and logs "merge"', async () => {
    const { ns, cv } = await collection([0, 10, 20, 30], ['a', 'b', 'a', 'a', 'a']);
    const result = await commits.commitMerge({ ns, shard: 'a', range: range(10, 'max'), expectedCollectionVersion: cv });
    expect(result.chunks).toHaveLength(1);
    const merged = chunkFromWire(result.chunks[0]!);
    expect(merged).toMatchObject({
      shard: 'a',
      version: withMajorMinor(cv, 1, 5),
      history: [{ validAfter: result.configTime, shard: 'a' }],
    });
    expect(result.chunks[0]!.range).toEqual(range(10, 'max'));
    expect(await allChunks(ns)).toHaveLength(3);
    expect((await changelogOf(ns))[0]).toMatchObject({ what: 'merge', shard: 'a', details: { count: 3 } });
  });

  const badMerges: Array<[string, WireChunkRange, string, string, unknown]> = [
    ['chunks on different shards', range(0, 30), 'a', 'otherShard', { range: range(0, 10), shard: 'b' }],
    ['a min inside a chunk', range(15, 30), 'a', 'minNotABound', { range: range(10, 20) }],
    ['a max inside a chunk', range(10, 25), 'a', 'maxNotABound', { range: range(20, 30) }],
    ['a single chunk', range(10, 20), 'a', 'singleChunk', { range: range(10, 20) }],
    ['chunks of another shard than named', range(10, 30), 'b', 'otherShard', { range: range(10, 20), shard: 'a' }],
  ];
  it.each(badMerges)(
    'refuses %s, naming the chunk that breaks the run, and changes nothing',
    async (_, mergeRange, shard, problem, chunk) => {
      const { ns, uuid, cv } = await collection();
      const error = await refused(uuid, () => commits.commitMerge({ ns, shard, range: mergeRange, expectedCollectionVersion: cv }));
      expect(error).toMatchObject({ code: 'BAD_VALUE', details: { ns, problem, chunk } });
    },
  );

  it('keeps the reason of the merge in its changelog row', async () => {
    const { ns, cv } = await collection();
    await commits.commitMerge({ ns, shard: 'a', range: range(10, 30), expectedCollectionVersion: cv, reason: 'autoMerge' });
    expect((await changelogOf(ns))[0]).toMatchObject({ what: 'merge', details: { reason: 'autoMerge', count: 2 } });
  });

  it('refuses to merge a run holding a chunk being migrated, naming the migration, so the migration can still commit', async () => {
    const { ns, uuid, cv } = await collection();
    const migrationId = await activeMigration(ns, uuid, 20, 30, 'balancerRound');
    const error = await refused(uuid, () => commits.commitMerge({ ns, shard: 'a', range: range(10, 30), expectedCollectionVersion: cv }));
    expect(error).toMatchObject({ code: 'CONFLICTING_OPERATION', details: { ns, problem: 'migrating', migrationId } });
    // Once the migration's record is gone, the same merge goes through.
    await db.dataSource.query('DELETE FROM active_migrations WHERE id = $1', [migrationId]);
    await commits.commitMerge({ ns, shard: 'a', range: range(10, 30), expectedCollectionVersion: cv });
  });

  it('refuses non-contiguous chunks (a gap in the catalog) and changes nothing', async () => {
    const { ns, uuid, cv } = await collection([0, 10, 20, 30], ['a', 'a', 'a', 'a', 'a']);
    await db.dataSource.query('DELETE FROM chunks WHERE collection_uuid = $1 AND min_ejson = \'{"x":10}\'', [uuid]);
    const error = await refused(uuid, () => commits.commitMerge({ ns, shard: 'a', range: range(0, 30), expectedCollectionVersion: cv }));
    expect(error).toMatchObject({ code: 'BAD_VALUE', details: { problem: 'gap', chunk: { range: range(20, 30) } } });
  });

  it('refuses an unknown namespace and a stale version', async () => {
    const { ns, uuid, cv } = await collection();
    expect(
      (await caught(() => commits.commitMerge({ ns: 'd.none', shard: 'a', range: range(20, 'max'), expectedCollectionVersion: cv }))).code,
    ).toBe('NAMESPACE_NOT_FOUND');
    const error = await refused(uuid, () =>
      commits.commitMerge({ ns, shard: 'a', range: range(10, 30), expectedCollectionVersion: withMajorMinor(cv, 1, 1) }),
    );
    expect(error.code).toBe('CONFLICTING_OPERATION');
  });
});

describe('commitMigration', () => {
  it('moves the chunk to <Mcv+1, 0>, bumps a control chunk on the donor to <Mcv+1, 1> and logs both shards', async () => {
    const { ns, cv } = await collection();
    const result = await commits.commitMigration({ ns, range: range(10, 20), donor: 'a', recipient: 'b', expectedCollectionVersion: cv });
    const [first, second] = result.chunks.map(chunkFromWire);
    const moved = result.chunks[0]!.range.min[0] === 10 ? first! : second!;
    const control = moved === first ? second! : first!;
    expect(moved).toMatchObject({ shard: 'b', version: withMajorMinor(cv, 2, 0) });
    expect(moved.history).toEqual([
      { validAfter: result.configTime, shard: 'b' },
      { validAfter: { t: 1_700_000_000, i: 1 }, shard: 'a' },
    ]);
    expect(control).toMatchObject({ shard: 'a', version: withMajorMinor(cv, 2, 1) });
    expect(result.collectionVersion).toEqual(withMajorMinor(cv, 2, 1));
    const table = RoutingTable.fromChunks(await allChunks(ns));
    expect(table.shardVersion('a')).toEqual(withMajorMinor(cv, 2, 1));
    expect(table.shardVersion('b')).toEqual(withMajorMinor(cv, 2, 0));
    expect((await changelogOf(ns))[0]).toMatchObject({ what: 'moveChunk.commit', shard: 'a', details: { donor: 'a', recipient: 'b' } });
  });

  it('keeps the reason its migration was started with in the commit row', async () => {
    const { ns, uuid, cv } = await collection();
    const migrationId = await activeMigration(ns, uuid, 10, 20, 'imbalance');
    await commits.commitMigration({ ns, range: range(10, 20), donor: 'a', recipient: 'b', expectedCollectionVersion: cv, migrationId });
    expect((await changelogOf(ns))[0]).toMatchObject({ what: 'moveChunk.commit', details: { reason: 'imbalance', migrationId } });
  });

  it("moves the donor's last chunk without a control chunk", async () => {
    const { ns, cv } = await collection([0], ['a', 'b']);
    const result = await commits.commitMigration({ ns, range: range('min', 0), donor: 'a', recipient: 'b', expectedCollectionVersion: cv });
    expect(result.chunks).toHaveLength(1);
    const table = RoutingTable.fromChunks(await allChunks(ns));
    expect(table.chunkCountOnShard('a')).toBe(0);
    expect(table.shardVersion('b')).toEqual(withMajorMinor(cv, 2, 0));
    expect((await changelogOf(ns))[0]!.details).toMatchObject({ controlChunk: null });
  });

  it('refuses bad migrations with coded errors and changes nothing', async () => {
    const { ns, uuid, cv } = await collection();
    const move = (change: Record<string, unknown>) => () =>
      commits.commitMigration({ ns, range: range(10, 20), donor: 'a', recipient: 'b', expectedCollectionVersion: cv, ...change });
    expect(await refused(uuid, move({ recipient: 'nowhere' }))).toMatchObject({ code: 'SHARD_NOT_FOUND', details: { shard: 'nowhere' } });
    expect(await refused(uuid, move({ recipient: 'a' }))).toMatchObject({ code: 'BAD_VALUE', details: { problem: 'sameShard' } });
    expect(await refused(uuid, move({ donor: 'b', recipient: 'a' }))).toMatchObject({
      code: 'BAD_VALUE',
      details: { problem: 'wrongShard', shard: 'a' },
    });
    expect(await refused(uuid, move({ range: range(10, 30) }))).toMatchObject({ code: 'BAD_VALUE', details: { problem: 'notAChunk' } });
    expect(await refused(uuid, move({ expectedCollectionVersion: withMajorMinor(cv, 1, 0) }))).toMatchObject({
      code: 'CONFLICTING_OPERATION',
    });
    expect(await refused(uuid, move({ ns: 'd.none' }))).toMatchObject({ code: 'NAMESPACE_NOT_FOUND' });
    await db.dataSource.query('UPDATE collections SET allow_migrations = false WHERE ns = $1', [ns]);
    expect(await refused(uuid, move({}))).toMatchObject({ code: 'CONFLICTING_OPERATION', details: { problem: 'migrationsNotAllowed' } });
  });
});

describe('jumbo flags and size estimates', () => {
  it('clearJumbo clears the flag and bumps the chunk to <Mcv, mcv+1>; a chunk that is not jumbo is left alone', async () => {
    const { ns, uuid, cv } = await collection();
    const marked = await commits.markJumbo({ ns, generation: { epoch: cv.epoch, timestamp: cv.timestamp }, range: range(10, 20) });
    expect(marked.chunks[0]).toMatchObject({ jumbo: true, version: { major: 1, minor: 2 } });
    expect(marked.collectionVersion).toEqual(cv);
    const cleared = await commits.clearJumbo({ ns, range: range(10, 20), expectedCollectionVersion: cv });
    expect(cleared.chunks[0]).toMatchObject({ version: withMajorMinor(cv, 1, 5) });
    expect(cleared.chunks[0]!.jumbo).toBeUndefined();
    expect(cleared.collectionVersion).toEqual(withMajorMinor(cv, 1, 5));
    expect((await changelogOf(ns)).map((e) => e.what)).toEqual(['markJumbo', 'clearJumboFlag']);
    const before = await snapshot(uuid);
    const again = await commits.clearJumbo({ ns, range: range(10, 20), expectedCollectionVersion: cleared.collectionVersion });
    expect(again.chunks).toEqual([]);
    expect(await snapshot(uuid)).toEqual(before);
  });

  it('clearJumbo and markJumbo refuse a range that is not a chunk, a stale version or another generation', async () => {
    const { ns, uuid, cv } = await collection();
    expect(await refused(uuid, () => commits.clearJumbo({ ns, range: range(10, 15), expectedCollectionVersion: cv }))).toMatchObject({
      code: 'BAD_VALUE',
      details: { problem: 'notAChunk' },
    });
    expect(
      await refused(uuid, () => commits.clearJumbo({ ns, range: range(10, 20), expectedCollectionVersion: withMajorMinor(cv, 1, 0) })),
    ).toMatchObject({
      code: 'CONFLICTING_OPERATION',
    });
    const other = { epoch: 'ffffffffffffffffffffff00', timestamp: cv.timestamp };
    expect(await refused(uuid, () => commits.markJumbo({ ns, generation: other, range: range(10, 20) }))).toMatchObject({
      code: 'STALE_EPOCH',
    });
  });

  it('recordChunkSizeEstimate stores the estimate without bumping any version', async () => {
    const { ns, uuid, cv } = await collection();
    const generation = { epoch: cv.epoch, timestamp: cv.timestamp };
    await commits.recordChunkSizeEstimate({ ns, generation, range: range(10, 20), estimatedSizeBytes: 12345 });
    const rows: Array<{ estimated_size_bytes: string }> = await db.dataSource.query(
      'SELECT estimated_size_bytes FROM chunks WHERE collection_uuid = $1 AND min_ejson = \'{"x":10}\'',
      [uuid],
    );
    expect(rows).toEqual([{ estimated_size_bytes: '12345' }]);
    expect((await reads.getCollection(ns)).collectionVersion).toEqual(cv);
    expect(
      await refused(uuid, () => commits.recordChunkSizeEstimate({ ns, generation, range: range(10, 30), estimatedSizeBytes: 1 })),
    ).toMatchObject({
      code: 'BAD_VALUE',
      details: { problem: 'notAChunk' },
    });
  });
});
