import { Long } from 'bson';
import { describe, expect, it } from 'vitest';
import {
  type Chunk,
  IGNORED_VERSION,
  RoutingTable,
  TesseraError,
  UNSHARDED_VERSION,
  createInitialChunks,
  encodeKey,
  globalMaxKey,
  globalMinKey,
  moveChunk,
  parseShardKeyPattern,
  splitChunk,
} from '@tessera/core';
import { type CatalogDatabase, type GetChunksRequest, type GetChunksResult, chunkToWire } from '@tessera/protocol';
import { CatalogCache } from '@tessera/routing';
import { ShardingState } from './sharding-state.js';

const pattern = parseShardKeyPattern({ x: 1 });
const epoch = 'e'.repeat(24);
const at = { t: 10, i: 1 };

/** A config server holding one collection `db.c` over two shards, and the database `db`. */
function config() {
  const state = {
    chunks: createInitialChunks({
      generation: { epoch, timestamp: at },
      keySpace: { min: globalMinKey(pattern), max: globalMaxKey(pattern) },
      splitPoints: [[Long.fromNumber(0)]],
      shards: ['s0', 's1'],
      at,
    }) as Chunk[],
    database: { name: 'db', primaryShard: 's0', version: { uuid: 'u', lastMod: 1 } } as CatalogDatabase,
    chunkReads: 0,
  };
  const source = {
    getDatabase: async (): Promise<CatalogDatabase> => state.database,
    getChunks: async (request: GetChunksRequest): Promise<GetChunksResult> => {
      state.chunkReads++;
      if (request.ns !== 'db.c') throw new TesseraError('NAMESPACE_NOT_FOUND', 'not sharded');
      const table = RoutingTable.fromChunks(state.chunks);
      return {
        ns: 'db.c',
        uuid: 'u',
        epoch,
        timestamp: at,
        keyPattern: { x: 1 },
        collectionVersion: table.collectionVersion,
        full: true,
        chunks: state.chunks.map(chunkToWire),
      };
    },
  };
  const moveFirstChunkTo = (shard: string) => {
    const table = RoutingTable.fromChunks(state.chunks);
    const [first, second] = state.chunks as [Chunk, Chunk];
    const result = moveChunk(first, shard, table.collectionVersion, { t: 20, i: 1 }, second.shard === first.shard ? second : undefined);
    state.chunks = [result.moved, result.control ?? second];
    return RoutingTable.fromChunks(state.chunks);
  };
  /** Splits the chunk at `point` in two, on its shard: a minor bump of the collection version. */
  const splitAt = (point: number) => {
    const table = RoutingTable.fromChunks(state.chunks);
    const chunk = table.chunkFor(encodeKey([point]));
    const pieces = splitChunk(chunk, [[Long.fromNumber(point)]], table.collectionVersion);
    state.chunks = [...state.chunks.filter((c) => c !== chunk), ...pieces];
    return RoutingTable.fromChunks(state.chunks);
  };
  return { state, source, moveFirstChunkTo, splitAt };
}

const key = (x: number) => encodeKey([x]);

describe("a shard's sharding state", () => {
  it('serves a request sent with its own shard version, filtering out keys it does not own', async () => {
    const { state, source } = config();
    const shard = new ShardingState('s1', new CatalogCache(source));
    const metadata = await shard.checkShardVersion('db.c', RoutingTable.fromChunks(state.chunks).shardVersion('s1'));
    expect(metadata.owns(key(5))).toBe(true);
    expect(metadata.owns(key(-5))).toBe(false);
  });

  it('answers STALE_CONFIG with both versions when the router is behind, without asking the config server again', async () => {
    const { state, source, moveFirstChunkTo } = config();
    const shard = new ShardingState('s1', new CatalogCache(source));
    const old = RoutingTable.fromChunks(state.chunks).shardVersion('s1');
    const now = moveFirstChunkTo('s1').shardVersion('s1');
    await shard.checkShardVersion('db.c', now);
    const reads = state.chunkReads;
    const error = await shard.checkShardVersion('db.c', old).catch((e: unknown) => e as TesseraError);
    expect(error).toMatchObject({
      code: 'STALE_CONFIG',
      retryable: true,
      details: { namespace: 'db.c', shard: 's1', received: old, wanted: now },
    });
    expect(state.chunkReads).toBe(reads);
  });

  it('serves a router that missed a split on this shard (same major), in both directions, without a refresh', async () => {
    const { state, source, splitAt } = config();
    const shard = new ShardingState('s1', new CatalogCache(source));
    const before = RoutingTable.fromChunks(state.chunks).shardVersion('s1');
    const after = splitAt(7).shardVersion('s1');
    expect(after.minor).not.toBe(before.minor);
    const reads = state.chunkReads;
    // The shard saw the split, the router did not.
    await shard.checkShardVersion('db.c', after);
    const served = await shard.checkShardVersion('db.c', before);
    expect(served.owns(key(5))).toBe(true);
    // A shard that has not seen the split yet serves a router that has.
    const behind = new ShardingState('s1', new CatalogCache(source));
    await behind.checkShardVersion('db.c', before);
    splitAt(3);
    await behind.checkShardVersion('db.c', RoutingTable.fromChunks(state.chunks).shardVersion('s1'));
    expect(state.chunkReads).toBe(reads + 2);
  });

  it('refreshes itself first when the router is ahead, then serves the request', async () => {
    const { state, source, moveFirstChunkTo } = config();
    const shard = new ShardingState('s1', new CatalogCache(source));
    await shard.checkShardVersion('db.c', RoutingTable.fromChunks(state.chunks).shardVersion('s1'));
    const newer = moveFirstChunkTo('s1').shardVersion('s1');
    const metadata = await shard.checkShardVersion('db.c', newer);
    expect(metadata.owns(key(-5))).toBe(true);
  });

  it('gives a query started before a migration commit the ownership it started with, and later queries the new one', async () => {
    const { state, source, moveFirstChunkTo } = config();
    const shard = new ShardingState('s0', new CatalogCache(source));
    const before = await shard.checkShardVersion('db.c', RoutingTable.fromChunks(state.chunks).shardVersion('s0'));
    const after = moveFirstChunkTo('s1');
    shard.invalidate('db.c');
    const later = await shard.checkShardVersion('db.c', after.shardVersion('s0'));
    expect(before.owns(key(-5))).toBe(true);
    expect(later.owns(key(-5))).toBe(false);
  });

  it('still answers STALE_CONFIG when even a fresh view disagrees with the router', async () => {
    const { state, source } = config();
    const shard = new ShardingState('s1', new CatalogCache(source));
    const mine = RoutingTable.fromChunks(state.chunks).shardVersion('s1');
    const bogus = { ...mine, major: mine.major + 5 };
    await expect(shard.checkShardVersion('db.c', bogus)).rejects.toMatchObject({ code: 'STALE_CONFIG' });
  });

  it('accepts the ignored version, as MongoDB does for internal reads', async () => {
    const { source } = config();
    await expect(new ShardingState('s0', new CatalogCache(source)).checkShardVersion('db.c', IGNORED_VERSION)).resolves.toBeDefined();
  });

  it('owns every document of an unsharded collection only on the primary shard, and checks the database version', async () => {
    const { state, source } = config();
    const primary = new ShardingState('s0', new CatalogCache(source));
    const other = new ShardingState('s1', new CatalogCache(source));
    expect((await primary.checkShardVersion('db.plain', UNSHARDED_VERSION)).owns(key(1))).toBe(true);
    expect((await other.checkShardVersion('db.plain', UNSHARDED_VERSION)).owns(key(1))).toBe(false);
    await primary.checkDatabaseVersion('db', state.database.version);
    await expect(primary.checkDatabaseVersion('db', { uuid: 'u', lastMod: 0 })).rejects.toMatchObject({
      code: 'STALE_DB_VERSION',
      details: { wanted: { uuid: 'u', lastMod: 1 } },
    });
  });
});
