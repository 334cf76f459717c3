import { Long } from 'bson';
import { describe, expect, it } from 'vitest';
import {
  type Chunk,
  type ChunkVersion,
  type ClusterTimestamp,
  RoutingTable,
  TesseraError,
  createInitialChunks,
  encodeKey,
  encodedKeyToHex,
  globalMaxKey,
  globalMinKey,
  moveChunk,
  parseShardKeyPattern,
  splitChunk,
} from '@tessera/core';
import { type CatalogDatabase, type GetChunksRequest, type GetChunksResult, chunkToWire } from '@tessera/protocol';
import { CatalogCache, type CatalogSource, REFRESH_ATTEMPTS, type RefreshKind } from './catalog-cache.js';
import { MAX_STALE_RETRIES, markStale, withStaleRetries } from './stale-retry.js';

const pattern = parseShardKeyPattern({ x: 1 });
const at: ClusterTimestamp = { t: 100, i: 1 };

/** An in-memory config server whose chunks change through libs/core's own operations. */
class FakeConfig implements CatalogSource {
  calls: GetChunksRequest[] = [];
  databaseCalls = 0;
  epoch = 'a'.repeat(24);
  chunks: Chunk[] = [];
  sharded = true;
  /** When set, the next incremental answer carries these chunks instead of the real delta. */
  corruptDelta: Chunk[] | undefined;
  /** Errors the next getChunks calls throw, one each, before answering again. */
  failures: TesseraError[] = [];

  constructor() {
    this.reshard();
  }

  reshard(epoch = this.epoch): void {
    this.epoch = epoch;
    this.chunks = createInitialChunks({
      generation: { epoch, timestamp: at },
      keySpace: { min: globalMinKey(pattern), max: globalMaxKey(pattern) },
      splitPoints: [[Long.fromNumber(100)], [Long.fromNumber(200)]],
      shards: ['s0', 's1'],
      at,
    });
  }

  get version(): ChunkVersion {
    return RoutingTable.fromChunks(this.chunks).collectionVersion;
  }

  split(index: number, point: number): void {
    const pieces = splitChunk(this.chunks[index]!, [[Long.fromNumber(point)]], this.version);
    this.chunks.splice(index, 1, ...pieces);
  }

  move(index: number, to: string): void {
    const chunk = this.chunks[index]!;
    const control = this.chunks.find((c, i) => i !== index && c.shard === chunk.shard);
    const result = moveChunk(chunk, to, this.version, { t: 200, i: 1 }, control);
    this.chunks = this.chunks.map((c) => (c === chunk ? result.moved : c === control && result.control ? result.control : c));
  }

  async getDatabase(name: string): Promise<CatalogDatabase> {
    this.databaseCalls++;
    if (name !== 'db') throw new TesseraError('NAMESPACE_NOT_FOUND', `database "${name}" does not exist`);
    return { name, primaryShard: 's1', version: { uuid: 'u', lastMod: 1 } };
  }

  async getChunks(request: GetChunksRequest): Promise<GetChunksResult> {
    this.calls.push(request);
    await new Promise((resolve) => setTimeout(resolve, 5));
    const failure = this.failures.shift();
    if (failure !== undefined) throw failure;
    if (!this.sharded) throw new TesseraError('NAMESPACE_NOT_FOUND', `collection "${request.ns}" is not sharded`);
    const since = request.sinceVersion;
    const full = since === undefined || since.epoch !== this.epoch;
    let chunks = full
      ? this.chunks
      : this.chunks.filter((c) => c.version.major > since.major || (c.version.major === since.major && c.version.minor > since.minor));
    if (!full && this.corruptDelta) {
      chunks = this.corruptDelta;
      this.corruptDelta = undefined;
    }
    return {
      ns: request.ns,
      uuid: 'uuid',
      epoch: this.epoch,
      timestamp: at,
      keyPattern: { x: 1 },
      collectionVersion: this.version,
      full,
      chunks: chunks.map(chunkToWire),
    };
  }
}

/** A table's chunks by encoded bounds: a Long 100 and a number 100 are the same key. */
function shape(table: RoutingTable) {
  return table.chunks().map((c) => ({
    min: encodedKeyToHex(encodeKey(c.range.min)),
    max: encodedKeyToHex(encodeKey(c.range.max)),
    shard: c.shard,
    version: c.version,
  }));
}

function setup(staleOnFailure = false) {
  const config = new FakeConfig();
  const refreshes: RefreshKind[] = [];
  const cache = new CatalogCache(config, (kind) => refreshes.push(kind), staleOnFailure);
  const table = async () => {
    const info = await cache.getCollectionRoutingInfo('db.c');
    if (info.kind !== 'sharded') throw new Error('expected a sharded collection');
    return info.table;
  };
  return { config, cache, refreshes, table };
}

describe('the catalog cache', () => {
  const unreachable = () => new TesseraError('HOST_UNREACHABLE', 'the config server cannot be reached');

  it('tries a failed refresh twice more before giving up', async () => {
    const { config, table } = setup();
    config.failures = [unreachable(), unreachable()];
    await table();
    expect(config.calls).toHaveLength(REFRESH_ATTEMPTS);
    config.failures = [unreachable(), unreachable(), unreachable()];
    await expect(new CatalogCache(config).getCollectionRoutingInfo('db.c')).rejects.toMatchObject({ code: 'HOST_UNREACHABLE' });
    expect(config.calls).toHaveLength(2 * REFRESH_ATTEMPTS);
  });

  it("answers a router's stale table when every attempt fails, and refreshes at its next use", async () => {
    const { config, cache, table } = setup(true);
    const before = await table();
    config.move(0, 's1');
    cache.markCollectionStale('db.c');
    config.failures = [unreachable(), unreachable(), unreachable()];
    expect(await table()).toBe(before);
    expect(shape(await table())).toEqual(shape(RoutingTable.fromChunks(config.chunks)));
  });

  it("never answers a shard's stale filtering metadata, nor a refusal that is not retryable", async () => {
    const { config, cache, table } = setup(false);
    await table();
    cache.markCollectionStale('db.c');
    config.failures = [unreachable(), unreachable(), unreachable()];
    await expect(table()).rejects.toMatchObject({ code: 'HOST_UNREACHABLE' });
    const router = setup(true);
    await router.table();
    router.cache.markCollectionStale('db.c');
    router.config.failures = [new TesseraError('ILLEGAL_OPERATION', 'refused')];
    await expect(router.table()).rejects.toMatchObject({ code: 'ILLEGAL_OPERATION' });
    expect(router.config.calls).toHaveLength(2);
  });

  it('loads a collection once and then answers from memory', async () => {
    const { config, refreshes, table } = setup();
    await table();
    await table();
    expect(config.calls).toHaveLength(1);
    expect(refreshes).toEqual(['full']);
  });

  it('fetches only the chunks newer than its version after being marked stale, and ends equal to a full rebuild', async () => {
    const { config, cache, refreshes, table } = setup();
    const before = await table();
    config.split(1, 150);
    config.move(0, 's1');
    cache.markCollectionStale('db.c');
    const after = await table();
    expect(config.calls[1]!.sinceVersion).toEqual(before.collectionVersion);
    expect(refreshes).toEqual(['full', 'incremental']);
    expect(shape(after)).toEqual(shape(RoutingTable.fromChunks(config.chunks)));
    expect(after.shardVersion('s0')).toEqual(RoutingTable.fromChunks(config.chunks).shardVersion('s0'));
  });

  it('makes concurrent callers wait for one refresh', async () => {
    const { config, cache, table } = setup();
    await table();
    config.split(0, 50);
    cache.markCollectionStale('db.c');
    await Promise.all(Array.from({ length: 20 }, () => table()));
    expect(config.calls).toHaveLength(2);
  });

  it("refreshes when a shard reports a version of itself that differs from the cache's, and not when they agree", async () => {
    const { config, cache, table } = setup();
    const before = await table();
    config.move(0, 's1');
    cache.markCollectionStale('db.c', before.shardVersion('s0'), 's0');
    await table();
    expect(config.calls).toHaveLength(1);
    const moved = RoutingTable.fromChunks(config.chunks).shardVersion('s0');
    cache.markCollectionStale('db.c', moved, 's0');
    expect((await table()).shardVersion('s0')).toEqual(moved);
    expect(config.calls).toHaveLength(2);
  });

  it('ignores a stale mark for a version it already has', async () => {
    const { config, cache, table } = setup();
    const current = await table();
    cache.markCollectionStale('db.c', current.collectionVersion);
    await table();
    expect(config.calls).toHaveLength(1);
  });

  it('reloads everything when the collection was re-created under a new epoch', async () => {
    const { config, cache, refreshes, table } = setup();
    await table();
    config.reshard('b'.repeat(24));
    cache.markCollectionStale('db.c');
    expect((await table()).generation.epoch).toBe('b'.repeat(24));
    expect(refreshes).toEqual(['full', 'full']);
  });

  it('falls back to a full reload when the delta does not fit the cached table', async () => {
    const { config, cache, refreshes, table } = setup();
    await table();
    config.split(2, 250);
    config.corruptDelta = [{ ...config.chunks[0]!, range: { min: [Long.fromNumber(1)], max: [Long.fromNumber(2)] } }];
    cache.markCollectionStale('db.c');
    const after = await table();
    expect(config.calls.map((c) => c.sinceVersion === undefined)).toEqual([true, false, true]);
    expect(refreshes).toEqual(['full', 'full']);
    expect(shape(after)).toEqual(shape(RoutingTable.fromChunks(config.chunks)));
  });

  it("routes an unsharded collection by its database's primary shard", async () => {
    const { config, cache } = setup();
    config.sharded = false;
    expect(await cache.getCollectionRoutingInfo('db.c')).toMatchObject({ kind: 'unsharded', database: { primaryShard: 's1' } });
  });

  it('does not cache a failure: a missing database is asked for again on the next use', async () => {
    const { config, cache } = setup();
    config.sharded = false;
    await expect(cache.getCollectionRoutingInfo('nodb.c')).rejects.toMatchObject({ code: 'NAMESPACE_NOT_FOUND' });
    await expect(cache.getCollectionRoutingInfo('nodb.c')).rejects.toMatchObject({ code: 'NAMESPACE_NOT_FOUND' });
    expect(config.databaseCalls).toBe(2);
  });
});

describe('stale routing retries', () => {
  const stale = (wanted?: ChunkVersion) => new TesseraError('STALE_CONFIG', 'stale', { details: wanted ? { wanted } : {} });

  it('refresh and retry after STALE_CONFIG until the shard agrees', async () => {
    const { config, cache, table } = setup();
    await table();
    config.split(0, 10);
    let attempts = 0;
    const answer = await withStaleRetries(cache, 'db.c', async () => {
      attempts++;
      const current = await table();
      if (current.collectionVersion.minor !== config.version.minor) throw stale(config.version);
      return 'done';
    });
    expect([answer, attempts, config.calls.length]).toEqual(['done', 2, 2]);
  });

  it('refresh and retry when the cached table names a shard that has left the cluster (SHARD_NOT_FOUND)', async () => {
    const { config, cache, table } = setup();
    await table();
    // The chunk moved off the shard, which then left: only a fresh table stops naming it.
    config.split(0, 10);
    let attempts = 0;
    const answer = await withStaleRetries(cache, 'db.c', async () => {
      attempts++;
      const current = await table();
      if (current.collectionVersion.minor !== config.version.minor) {
        throw new TesseraError('SHARD_NOT_FOUND', 'no shard named "s9" in the cluster', { details: { shard: 's9' } });
      }
      return 'done';
    });
    expect([answer, attempts, config.calls.length]).toEqual(['done', 2, 2]);
  });

  it(`give up after ${MAX_STALE_RETRIES} attempts with the last stale error`, async () => {
    const { cache } = setup();
    let attempts = 0;
    await expect(
      withStaleRetries(cache, 'db.c', async () => {
        attempts++;
        throw stale();
      }),
    ).rejects.toMatchObject({ code: 'STALE_CONFIG' });
    expect(attempts).toBe(MAX_STALE_RETRIES);
  });

  it('pass any other error through at once', async () => {
    const { cache } = setup();
    let attempts = 0;
    await expect(
      withStaleRetries(cache, 'db.c', async () => {
        attempts++;
        throw new TesseraError('DUPLICATE_KEY', 'dup');
      }),
    ).rejects.toMatchObject({ code: 'DUPLICATE_KEY' });
    expect(attempts).toBe(1);
  });

  it("markStale judges a shard's answer against that shard's cached version", async () => {
    const { config, cache, table } = setup();
    const cached = await table();
    const answer = (wanted: ChunkVersion) => new TesseraError('STALE_CONFIG', 'stale', { details: { wanted, shard: 's1' } });
    // s1 wants what the table says it has: nothing to reload.
    expect(markStale(cache, 'db.c', answer(cached.shardVersion('s1')))).toBe(true);
    await table();
    expect(config.calls).toHaveLength(1);
    // s1 wants another version than the table's for s1, though the collection's is newer.
    expect(markStale(cache, 'db.c', answer(cached.shardVersion('s0')))).toBe(true);
    await table();
    expect(config.calls).toHaveLength(2);
  });

  it('markStale answers false for an error that is not about routing, and marks nothing', async () => {
    const { config, cache, table } = setup();
    await table();
    expect(markStale(cache, 'db.c', new TesseraError('DUPLICATE_KEY', 'dup'))).toBe(false);
    expect(markStale(cache, 'db.c', new Error('boom'))).toBe(false);
    await table();
    expect(config.calls).toHaveLength(1);
  });
});
