import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type Chunk,
  type ChunkVersion,
  type ClusterTimestamp,
  RoutingTable,
  TesseraError,
  compareClusterTimestamps,
  compareShardKeys,
} from '@tessera/core';
import { chunkFromWire, chunkRangeToWire, shardKeyToWire } from '@tessera/protocol';
import { type TestDatabase, createTestDatabase } from '../../../../test/pg/test-database.js';
import { catalogServices, k } from './catalog-fixture.js';
import { seedShardedCollection } from './catalog-seed.js';

const NS = 'race.c';
const CLIENTS = 5;
const SPLITS = 50;
const RETRIES = 3;

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('config');
});
afterAll(async () => db?.drop());

interface Won {
  version: ChunkVersion;
  configTime: ClusterTimestamp;
  split: { min: number; max: number; at: number };
}

describe('concurrent split commits on one collection', () => {
  it('from several config processes: versions unique and increasing, coverage intact, nothing lost or doubled, losers told CONFLICTING_OPERATION', async () => {
    const points = [0, 1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000];
    await seedShardedCollection(db.dataSource, { ns: NS, shards: ['s0', 's1'], splitPoints: points.map((p) => k(p)) });
    // Each client is a config process of its own: a connection pool, a vector clock, services.
    const clients = await Promise.all(Array.from({ length: CLIENTS }, async (_, i) => catalogServices(await db.connect(), `config${i}`)));
    const won: Won[] = [];
    const lost: TesseraError[] = [];
    let attempt = 0;

    // Splits the chunk chosen by a deterministic walk at a point strictly inside it.
    const splitOnce = async (client: (typeof clients)[number]): Promise<void> => {
      for (let retry = 0; retry <= RETRIES; retry++) {
        const read = await client.reads.getChunks({ ns: NS });
        const bounded = read.chunks
          .map(chunkFromWire)
          .filter((c) => typeof c.range.min[0] === 'number' && typeof c.range.max[0] === 'number');
        const chunk = bounded[(attempt++ * 7) % bounded.length] as Chunk;
        const [min, max] = [chunk.range.min[0] as number, chunk.range.max[0] as number];
        const at = min + (max - min) * (0.25 + 0.5 * ((attempt * 0.618) % 1));
        try {
          const result = await client.commits.commitSplit({
            ns: NS,
            shard: chunk.shard,
            range: chunkRangeToWire(chunk.range),
            splitPoints: [shardKeyToWire(k(at))],
            expectedCollectionVersion: read.collectionVersion,
          });
          won.push({ version: result.collectionVersion, configTime: result.configTime, split: { min, max, at } });
          return;
        } catch (error) {
          if (!(error instanceof TesseraError) || error.code !== 'CONFLICTING_OPERATION') throw error;
          lost.push(error);
        }
      }
    };

    let next = 0;
    await Promise.all(
      clients.map(async (client) => {
        while (next < SPLITS) {
          next++;
          await splitOnce(client);
        }
      }),
    );

    // The race happened, and every loser was told CONFLICTING_OPERATION (retryable, both versions).
    expect(lost.length).toBeGreaterThan(0);
    for (const error of lost) expect(error).toMatchObject({ retryable: true, details: { ns: NS, problem: 'staleVersion' } });

    // Committed versions are unique and increase in commit (ConfigTime) order, each split on top
    // of the previous one (a 2-piece split adds 2 to the minor): 1|10, 1|12, ...
    const ordered = [...won].sort((a, b) => compareClusterTimestamps(a.configTime, b.configTime));
    expect(ordered.map((w) => w.version.minor)).toEqual(ordered.map((_, i) => points.length + 2 * (i + 1)));
    expect(ordered.every((w) => w.version.major === 1)).toBe(true);

    // Coverage intact, and the chunk rows are exactly the seeded chunks split at the winners' points.
    const final = (await clients[0]!.reads.getChunks({ ns: NS })).chunks.map(chunkFromWire);
    const table = RoutingTable.fromChunks(final);
    expect(table.size).toBe(points.length + 1 + won.length);
    const expectedBounds = [...points, ...won.map((w) => w.split.at)].sort((a, b) => a - b);
    expect(final.slice(1).map((c) => c.range.min[0])).toEqual(expectedBounds);
    for (let i = 1; i < final.length; i++)
      expect(compareShardKeys((final[i - 1] as Chunk).range.max, (final[i] as Chunk).range.min)).toBe(0);
    expect(table.collectionVersion).toEqual(ordered[ordered.length - 1]!.version);

    // One changelog row per committed split, none for the losers.
    const log: Array<{ n: number }> = await db.dataSource.query(
      "SELECT count(*)::int AS n FROM changelog WHERE ns = $1 AND what = 'split'",
      [NS],
    );
    expect(log[0]!.n).toBe(won.length);
    expect(won.length).toBeGreaterThanOrEqual(SPLITS / 2);
  });
});
