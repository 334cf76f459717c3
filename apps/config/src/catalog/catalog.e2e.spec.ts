import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RoutingTable, TesseraError } from '@tessera/core';
import { type ConfigClient, chunkFromWire, chunkRangeToWire, shardKeyToWire } from '@tessera/protocol';
import { FAST_CONFIG_ENV, errorOf, waitForLeader } from '../../../../test/e2e/helpers.js';
import { startTestCluster } from '../../../../test/e2e/test-cluster.js';

let dispose: () => Promise<void>;
let config: ConfigClient;

beforeAll(async () => {
  const started = await startTestCluster({ shards: 2, routers: 0, env: FAST_CONFIG_ENV });
  dispose = started.dispose;
  config = started.cluster.configClient();
  await waitForLeader(config);
});
afterAll(async () => dispose?.());

describe('the catalog over signed HTTP', () => {
  it('reads, splits, migrates and refreshes incrementally through ConfigClient; errors arrive as TesseraError with details', async () => {
    const db = await config.enableSharding({ db: 'cat' });
    await config.shardCollection({ ns: 'cat.events', key: { user: 'hashed' } });
    expect(await config.getDatabase('cat')).toEqual({ name: 'cat', primaryShard: db.primaryShard, version: db.version });
    const collection = await config.getCollection('cat.events');
    expect(collection).toMatchObject({ ns: 'cat.events', keyPattern: { user: 'hashed' }, allowMigrations: true });

    // Hashed pre-split bounds are int64 values beyond 2^53: they must survive the wire exactly.
    const full = await config.getChunks({ ns: 'cat.events' });
    expect(full).toMatchObject({ full: true, collectionVersion: collection.collectionVersion });
    let table = RoutingTable.fromChunks(full.chunks.map(chunkFromWire));
    const first = table.chunks()[0]!;
    const split = await config.commitSplit({
      ns: 'cat.events',
      shard: first.shard,
      range: chunkRangeToWire(first.range),
      splitPoints: [shardKeyToWire([-6_000_000_000_000_000_000n])],
      expectedCollectionVersion: full.collectionVersion,
    });
    const piece = chunkFromWire(split.chunks[1]!);
    const recipient = piece.shard === 'shard0' ? 'shard1' : 'shard0';
    const moved = await config.commitMigration({
      ns: 'cat.events',
      range: chunkRangeToWire(piece.range),
      donor: piece.shard,
      recipient,
      expectedCollectionVersion: split.collectionVersion,
    });
    const delta = await config.getChunks({ ns: 'cat.events', sinceVersion: full.collectionVersion });
    expect(delta.full).toBe(false);
    table = table.applyChanges(delta.chunks.map(chunkFromWire));
    expect(table.chunks()).toEqual(
      RoutingTable.fromChunks((await config.getChunks({ ns: 'cat.events' })).chunks.map(chunkFromWire)).chunks(),
    );
    expect(table.collectionVersion).toEqual(moved.collectionVersion);
    expect(table.shardFor([-5_000_000_000_000_000_000n])).toBe(recipient);

    const stale = await errorOf(
      config.commitMerge({
        ns: 'cat.events',
        shard: first.shard,
        range: chunkRangeToWire(first.range),
        expectedCollectionVersion: full.collectionVersion,
      }),
    );
    expect(stale).toBeInstanceOf(TesseraError);
    expect(stale).toMatchObject({
      code: 'CONFLICTING_OPERATION',
      retryable: true,
      details: { expected: full.collectionVersion, current: moved.collectionVersion },
    });
    expect((await errorOf(config.getCollection('cat.none'))).code).toBe('NAMESPACE_NOT_FOUND');
    expect((await errorOf(config.getChunks({ ns: 'cat.events', sinceVersion: { epoch: 'nope' } as never }))).code).toBe('BAD_VALUE');
  });
});
