import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TesseraError } from '@tessera/core';
import type { ConfigClient } from '@tessera/protocol';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';
import { encodeKey } from '@tessera/core';
import { FAST_CONFIG_ENV, errorOf, waitForLeader } from './helpers.js';
import { startTestCluster } from './test-cluster.js';

let cluster: LocalCluster;
let dispose: () => Promise<void>;
let config: ConfigClient;
let catalog: pg.Pool;

beforeAll(async () => {
  ({ cluster, dispose } = await startTestCluster({ shards: 2, spareShards: 1, routers: 0, env: FAST_CONFIG_ENV }));
  config = cluster.configClient();
  catalog = new pg.Pool({ connectionString: cluster.node('config').env.TESSERA_DATABASE_URL, max: 2 });
  await waitForLeader(config);
  // DDL alone: a balancer draining a shard these tests mark draining would write to the changelog
  // that refusedWithoutChange watches.
  await config.updateSettings({ balancer: { mode: 'off' } });
});

afterAll(async () => {
  await catalog?.end();
  await dispose?.();
});

async function count(sql: string, params: unknown[] = []): Promise<number> {
  const result = await catalog.query<{ n: string }>(`SELECT count(*) AS n FROM (${sql}) q`, params);
  return Number(result.rows[0]!.n);
}

async function shardTables(shard: string): Promise<string[]> {
  const pool = new pg.Pool({ connectionString: cluster.node(shard).env.TESSERA_DATABASE_URL, max: 1 });
  try {
    return (await pool.query<{ ns: string }>('SELECT ns FROM collections ORDER BY ns')).rows.map((r) => r.ns);
  } finally {
    await pool.end();
  }
}

/** Runs `call`, expects the code, and checks the catalog's changelog did not grow. */
async function refusedWithoutChange(call: Promise<unknown>, code: string): Promise<TesseraError> {
  // Take the refusal at once: a call refused before the count below answers would otherwise be
  // an unhandled rejection for a moment, which vitest reports as an error of the run.
  const refused = errorOf(call);
  const before = await count('SELECT 1 FROM changelog');
  const error = await refused;
  expect(error.code, error.message).toBe(code);
  expect(await count('SELECT 1 FROM changelog')).toBe(before);
  return error;
}

describe('databases', () => {
  it('creates a database on the least loaded shard, and answers it again unchanged', async () => {
    const created = await config.enableSharding({ db: 'shop' });
    expect(['shard0', 'shard1']).toContain(created.primaryShard);
    expect(created.version.lastMod).toBe(1);
    expect(await config.enableSharding({ db: 'shop' })).toEqual(created);
    expect(await count("SELECT 1 FROM changelog WHERE what = 'createDatabase' AND ns = 'shop'")).toBe(1);
  });

  it('refuses a name differing only in case, another primary for an existing database, an unknown shard and a bad name', async () => {
    const shop = await config.enableSharding({ db: 'shop' });
    const other = shop.primaryShard === 'shard0' ? 'shard1' : 'shard0';
    expect((await refusedWithoutChange(config.enableSharding({ db: 'SHOP' }), 'ILLEGAL_OPERATION')).message).toContain(
      'differs only in case',
    );
    expect((await refusedWithoutChange(config.enableSharding({ db: 'shop', primaryShard: other }), 'ILLEGAL_OPERATION')).message).toContain(
      'use movePrimary',
    );
    await refusedWithoutChange(config.enableSharding({ db: 'fresh', primaryShard: 'nowhere' }), 'SHARD_NOT_FOUND');
    expect((await refusedWithoutChange(config.enableSharding({ db: 'bad.name' }), 'BAD_VALUE')).message).toContain('db:');
  });

  it('moves a primary shard with a new database version, and refuses an unknown target', async () => {
    const before = await config.enableSharding({ db: 'movable', primaryShard: 'shard0' });
    const after = await config.movePrimary({ db: 'movable', to: 'shard1' });
    expect(after).toEqual({ name: 'movable', primaryShard: 'shard1', version: { uuid: before.version.uuid, lastMod: 2 } });
    await refusedWithoutChange(config.movePrimary({ db: 'movable', to: 'shard9' }), 'SHARD_NOT_FOUND');
    await refusedWithoutChange(config.movePrimary({ db: 'nosuchdb', to: 'shard0' }), 'NAMESPACE_NOT_FOUND');
  });
});

describe('shardCollection', () => {
  it('starts a ranged key with one chunk 1|0 on the primary shard, whose table it creates', async () => {
    const shop = await config.enableSharding({ db: 'shop' });
    const result = await config.shardCollection({ ns: 'shop.orders', key: { customer: 1, at: 1 } });
    expect(result).toMatchObject({ ns: 'shop.orders', chunks: 1, shards: [shop.primaryShard], unique: false });
    const chunks = await catalog.query('SELECT shard, major, minor, min_ejson, max_ejson FROM chunks WHERE collection_uuid = $1', [
      result.uuid,
    ]);
    expect(chunks.rows).toEqual([
      {
        shard: shop.primaryShard,
        major: 1,
        minor: 0,
        min_ejson: '{"customer":{"$minKey":1},"at":{"$minKey":1}}',
        max_ejson: '{"customer":{"$maxKey":1},"at":{"$maxKey":1}}',
      },
    ]);
    expect(await shardTables(shop.primaryShard)).toContain('shop.orders');
    expect(await count("SELECT 1 FROM changelog WHERE what = 'shardCollection.end' AND ns = 'shop.orders'")).toBe(1);
  });

  it('pre-splits a hashed key into 2 chunks per shard, spread evenly, covering the whole hash space', async () => {
    const result = await config.shardCollection({ ns: 'events.clicks', key: { user: 'hashed' } });
    expect(result.chunks).toBe(4);
    expect(result.shards).toEqual(['shard0', 'shard1']);
    const rows = (
      await catalog.query('SELECT shard, minor, min_ejson, max_ejson FROM chunks WHERE collection_uuid = $1 ORDER BY min', [result.uuid])
    ).rows;
    expect(rows.map((r) => r.shard).sort()).toEqual(['shard0', 'shard0', 'shard1', 'shard1']);
    expect(rows.map((r) => r.minor).sort()).toEqual([0, 1, 2, 3]);
    expect(rows[0].min_ejson).toBe('{"user":{"$minKey":1}}');
    expect(rows[1].min_ejson).toBe('{"user":{"$numberLong":"-4611686018427387904"}}');
    expect(rows[2].min_ejson).toBe('{"user":0}');
    expect(rows[3].max_ejson).toBe('{"user":{"$maxKey":1}}');
    for (let i = 1; i < rows.length; i++) expect(rows[i].min_ejson).toBe(rows[i - 1].max_ejson);
    expect(await shardTables('shard0')).toContain('events.clicks');
    expect(await shardTables('shard1')).toContain('events.clicks');
  });

  it('answers the existing collection when asked again with the same options', async () => {
    const first = await config.shardCollection({ ns: 'events.views', key: { page: 1 } });
    expect(await config.shardCollection({ ns: 'events.views', key: { page: 1 } })).toEqual(first);
  });

  it.each([
    ['another key for a sharded collection', { ns: 'events.views', key: { other: 1 } }, 'ILLEGAL_OPERATION', 'already sharded'],
    ['a malformed key pattern', { ns: 'events.bad', key: { a: -1 } }, 'BAD_VALUE', 'key'],
    ['a unique hashed key', { ns: 'events.bad', key: { a: 'hashed' }, unique: true }, 'BAD_VALUE', 'cannot be unique'],
    ['numInitialChunks with a ranged key', { ns: 'events.bad', key: { a: 1 }, numInitialChunks: 8 }, 'BAD_VALUE', 'numInitialChunks'],
    ['an invalid namespace', { ns: 'nodot', key: { a: 1 } }, 'BAD_VALUE', 'ns:'],
    ['a system collection', { ns: 'events.system.x', key: { a: 1 } }, 'BAD_VALUE', 'system'],
  ])('refuses %s, changing nothing', async (_, request, code, message) => {
    const error = await refusedWithoutChange(config.shardCollection(request as never), code);
    expect(error.message).toContain(message);
  });
});

describe('zones', () => {
  it('assigns shards to zones and key ranges to zones', async () => {
    await config.shardCollection({ ns: 'geo.places', key: { country: 1, city: 1 } });
    expect(await config.addShardToZone({ shard: 'shard0', zone: 'EU' })).toEqual({ zones: ['EU'] });
    expect(await config.addShardToZone({ shard: 'shard0', zone: 'EU' })).toEqual({ zones: ['EU'] });
    await config.updateZoneKeyRange({
      ns: 'geo.places',
      min: { country: 'DE', city: { $minKey: 1 } },
      max: { country: 'DF', city: { $minKey: 1 } },
      zone: 'EU',
    });
    expect(await count("SELECT 1 FROM tags WHERE ns = 'geo.places' AND tag = 'EU'")).toBe(1);
  });

  it.each([
    [
      'an unknown zone',
      { min: { country: 'FR', city: { $minKey: 1 } }, max: { country: 'FS', city: { $minKey: 1 } }, zone: 'MARS' },
      'NOT_FOUND',
    ],
    [
      'an overlapping range',
      { min: { country: 'DA', city: { $minKey: 1 } }, max: { country: 'DE', city: 'Berlin' }, zone: 'EU' },
      'BAD_VALUE',
    ],
    ['bounds missing a shard key field', { min: { country: 'FR' }, max: { country: 'FS' }, zone: 'EU' }, 'BAD_VALUE'],
    [
      'bounds with a field not in the key',
      { min: { country: 'FR', city: 1, x: 1 }, max: { country: 'FS', city: 1, x: 1 }, zone: 'EU' },
      'BAD_VALUE',
    ],
    ['min not below max', { min: { country: 'FS', city: 1 }, max: { country: 'FR', city: 1 }, zone: 'EU' }, 'BAD_VALUE'],
  ])('refuses %s, changing nothing', async (_, range, code) => {
    const tags = await count('SELECT 1 FROM tags');
    await refusedWithoutChange(config.updateZoneKeyRange({ ns: 'geo.places', ...range } as never), code);
    expect(await count('SELECT 1 FROM tags')).toBe(tags);
  });

  it('refuses to take the last shard out of a zone that still has ranges, and to zone an unknown shard', async () => {
    expect(
      (await refusedWithoutChange(config.removeShardFromZone({ shard: 'shard0', zone: 'EU' }), 'ILLEGAL_OPERATION')).message,
    ).toContain('last shard in zone');
    await refusedWithoutChange(config.addShardToZone({ shard: 'shard7', zone: 'EU' }), 'SHARD_NOT_FOUND');
    await config.updateZoneKeyRange({
      ns: 'geo.places',
      min: { country: 'DE', city: { $minKey: 1 } },
      max: { country: 'DF', city: { $minKey: 1 } },
      zone: null,
    });
    expect(await config.removeShardFromZone({ shard: 'shard0', zone: 'EU' })).toEqual({ zones: [] });
  });
});

describe('refineCollectionShardKey', () => {
  it('adds suffix fields under a new epoch, keeping chunk versions and extending bounds with MinKey', async () => {
    const before = await config.shardCollection({ ns: 'shop.carts', key: { customer: 1 } });
    const after = await config.refineCollectionShardKey({ ns: 'shop.carts', key: { customer: 1, cart: 1 } });
    expect(after).toMatchObject({ uuid: before.uuid, key: { customer: 1, cart: 1 }, chunks: 1 });
    expect(after.epoch).not.toBe(before.epoch);
    const chunk = (await catalog.query('SELECT major, minor, min_ejson FROM chunks WHERE collection_uuid = $1', [before.uuid])).rows[0];
    expect(chunk).toEqual({ major: 1, minor: 0, min_ejson: '{"customer":{"$minKey":1},"cart":{"$minKey":1}}' });
    expect((await catalog.query("SELECT allow_migrations FROM collections WHERE ns = 'shop.carts'")).rows).toEqual([
      { allow_migrations: true },
    ]);
  });

  it('fails whole when a document cannot take the new key, leaving the key and migrations as they were', async () => {
    const basket = await config.shardCollection({ ns: 'shop.baskets', key: { customer: 1 } });
    const primary = basket.shards[0]!;
    const shardDb = new pg.Pool({ connectionString: cluster.node(primary).env.TESSERA_DATABASE_URL, max: 1 });
    const table = `c_${basket.uuid.replaceAll('-', '')}`;
    // 1,200 documents that can take the new key, then one (sorting last) that cannot: the
    // re-key has passed a whole batch of 1,000 before it fails.
    const documents = [
      ...Array.from({ length: 1_200 }, (_, i) => ({ _id: i, customer: `c${i}`, cart: i })),
      { _id: 1_000_000, customer: 'ada', cart: [1, 2] },
    ];
    await shardDb.query(
      `INSERT INTO ${table} (id, shard_key, doc, size, valid_from) SELECT *, 0 FROM unnest($1::bytea[], $2::bytea[], $3::json[], $4::int[])`,
      [
        documents.map((d) => Buffer.from(encodeKey([d._id]))),
        documents.map((d) => Buffer.from(encodeKey([d.customer]))),
        documents.map((d) => JSON.stringify(d)),
        documents.map(() => 40),
      ],
    );
    await shardDb.end();
    const error = await errorOf(config.refineCollectionShardKey({ ns: 'shop.baskets', key: { customer: 1, cart: 1 } }));
    expect(error.code).toBe('BAD_VALUE');
    expect(error.message).toContain('cart');
    const after = (await catalog.query("SELECT key_pattern, allow_migrations FROM collections WHERE ns = 'shop.baskets'")).rows[0];
    expect(after).toEqual({ key_pattern: { customer: 1 }, allow_migrations: true });
    expect(
      await count(
        "SELECT 1 FROM ddl_coordinators WHERE resource = 'shop.baskets' AND kind = 'refineCollectionShardKey' AND phase = 'failed'",
      ),
    ).toBe(1);
    const shardSide = new pg.Pool({ connectionString: cluster.node(primary).env.TESSERA_DATABASE_URL, max: 1 });
    const local = (await shardSide.query('SELECT key_pattern FROM collections WHERE uuid = $1', [basket.uuid])).rows[0];
    const keys = (await shardSide.query(`SELECT shard_key FROM ${table}`)).rows.map((r: { shard_key: Buffer }) =>
      r.shard_key.toString('hex'),
    );
    await shardSide.end();
    expect(local).toEqual({ key_pattern: { customer: 1 } });
    expect(keys.sort()).toEqual(documents.map((d) => Buffer.from(encodeKey([d.customer])).toString('hex')).sort());
  });

  it('refuses a key that does not extend the current one', async () => {
    expect(
      (await refusedWithoutChange(config.refineCollectionShardKey({ ns: 'shop.carts', key: { cart: 1, customer: 1 } }), 'BAD_VALUE'))
        .message,
    ).toContain('must start with');
    await refusedWithoutChange(config.refineCollectionShardKey({ ns: 'shop.nothing', key: { a: 1, b: 1 } }), 'NAMESPACE_NOT_FOUND');
  });
});

describe('dropping', () => {
  it('drops a collection on every shard and in the catalog; a re-created one gets a new uuid and epoch', async () => {
    const first = await config.shardCollection({ ns: 'tmp.things', key: { x: 'hashed' } });
    expect(await config.dropCollection({ ns: 'tmp.things' })).toEqual({ dropped: true });
    expect(await count('SELECT 1 FROM chunks WHERE collection_uuid = $1', [first.uuid])).toBe(0);
    expect(await shardTables('shard0')).not.toContain('tmp.things');
    expect(await shardTables('shard1')).not.toContain('tmp.things');
    expect(await config.dropCollection({ ns: 'tmp.things' })).toEqual({ dropped: false });
    const second = await config.shardCollection({ ns: 'tmp.things', key: { x: 'hashed' } });
    expect(second.uuid).not.toBe(first.uuid);
    expect(second.epoch).not.toBe(first.epoch);
  });

  it('drops a database with its collections', async () => {
    await config.shardCollection({ ns: 'gone.a', key: { k: 1 } });
    await config.shardCollection({ ns: 'gone.b', key: { k: 'hashed' } });
    expect(await config.dropDatabase({ db: 'gone' })).toEqual({ dropped: true });
    expect(await count("SELECT 1 FROM collections WHERE db = 'gone'")).toBe(0);
    expect(await count("SELECT 1 FROM databases WHERE name = 'gone'")).toBe(0);
    expect((await shardTables('shard0')).filter((ns) => ns.startsWith('gone.'))).toEqual([]);
    expect(await config.dropDatabase({ db: 'gone' })).toEqual({ dropped: false });
  });
});

describe('removeShard', () => {
  it('marks a shard draining, reports the chunks and databases it still holds, and keeps new databases off it', async () => {
    const owner = await config.enableSharding({ db: 'drainme', primaryShard: 'shard1' });
    expect(owner.primaryShard).toBe('shard1');
    const started = await config.removeShard({ name: 'shard1' });
    expect(started.state).toBe('started');
    const ongoing = await config.removeShard({ name: 'shard1' });
    expect(ongoing.state).toBe('ongoing');
    expect(ongoing.dbsToMove).toContain('drainme');
    expect(ongoing.remaining.chunks).toBeGreaterThan(0);
    expect(ongoing.note).toContain('movePrimary needed for drainme');
    await refusedWithoutChange(config.enableSharding({ db: 'newdb', primaryShard: 'shard1' }), 'ILLEGAL_OPERATION');
  });

  it('refuses to remove the last active shard while the other drains', async () => {
    const error = await refusedWithoutChange(config.removeShard({ name: 'shard0' }), 'ILLEGAL_OPERATION');
    expect(error.message).toContain('last active shard');
    expect((await config.listShards()).find((s) => s.name === 'shard0')?.state).toBe('active');
  });

  it('removes an empty shard in two calls, ticking TopologyTime, and refuses an unknown shard', async () => {
    await config.addShard({ name: 'shard2', url: cluster.node('shard2').url });
    expect(await config.removeShard({ name: 'shard2' })).toEqual({
      state: 'started',
      shard: 'shard2',
      remaining: { chunks: 0, jumboChunks: 0, databases: 0, migrations: 0 },
      dbsToMove: [],
      migrationIds: [],
      note: 'nothing holds shard2; the next removeShard completes it',
    });
    expect((await config.removeShard({ name: 'shard2' })).state).toBe('completed');
    expect((await config.listShards()).map((s) => s.name)).toEqual(['shard0', 'shard1']);
    expect(await count("SELECT 1 FROM changelog WHERE what = 'removeShard' AND shard = 'shard2'")).toBe(1);
    await refusedWithoutChange(config.removeShard({ name: 'shard2' }), 'SHARD_NOT_FOUND');
  });
});
