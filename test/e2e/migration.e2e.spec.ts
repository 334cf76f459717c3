import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConfigClient, MoveRangeResult } from '@tessera/protocol';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';
import { FAST_CONFIG_ENV, errorOf, eventually, waitForLeader } from './helpers.js';
import { RouterApi, onShardDatabase, storedCount } from './router-api.js';
import { startTestCluster } from './test-cluster.js';

let cluster: LocalCluster;
let dispose: () => Promise<void>;
let config: ConfigClient;
let api: RouterApi;

beforeAll(async () => {
  ({ cluster, dispose } = await startTestCluster({
    shards: 3,
    routers: 1,
    env: { ...FAST_CONFIG_ENV, TESSERA_ORPHAN_CLEANUP_DELAY_SECS: '0', TESSERA_MIGRATION_CLONE_BATCH_DOCUMENTS: '500' },
  }));
  config = cluster.configClient();
  api = new RouterApi(cluster.routerUrls[0]!);
  await waitForLeader(config);
});

afterAll(async () => {
  await api?.close();
  await dispose?.();
});


async function insert(ns: string, documents: unknown[]): Promise<void> {
  const [db, coll] = ns.split('.');
  for (let i = 0; i < documents.length; i += 1000) {
    const answer = await api.call('POST', `/v1/${db}/${coll}/insert`, { documents: documents.slice(i, i + 1000) });
    expect(answer.json, JSON.stringify(answer.json)).toMatchObject({ writeErrors: [] });
  }
}

async function placement(ns: string): Promise<Array<{ min: unknown; shard: string }>> {
  return (await config.getChunks({ ns })).chunks.map((c) => ({ min: c.range.min[0], shard: c.shard }));
}

async function changelog(what: string, ns: string): Promise<Array<Record<string, unknown>>> {
  return onShardDatabase(cluster, 'config', async (pool) => {
    const rows = await pool.query<{ details: Record<string, unknown> }>('SELECT details FROM changelog WHERE what = $1 AND ns = $2 ORDER BY id', [what, ns]);
    return rows.rows.map((r) => r.details);
  });
}

describe('moveRange', () => {
  const ns = 'mig.basic';
  const docs = Array.from({ length: 3000 }, (_, i) => ({ _id: i, x: i, y: i % 97, pad: 'p'.repeat(150) }));
  let result: MoveRangeResult;

  beforeAll(async () => {
    await config.shardCollection({ ns, key: { x: 1 } });
    expect((await api.call('POST', '/v1/mig/basic/indexes', { indexes: [{ key: { y: 1 }, name: 'y_1' }] })).status).toBe(200);
    await insert(ns, docs);
    const primary = (await placement(ns))[0]!.shard;
    const target = ['shard0', 'shard1', 'shard2'].find((s) => s !== primary)!;
    result = await config.moveRange({ ns, min: { x: 1000 }, max: { x: 2000 }, toShard: target, waitForDelete: true });
  });

  it('splits off the sub-range and moves it, with every phase reported', async () => {
    const chunks = await placement(ns);
    expect(chunks.map((c) => c.min)).toEqual([{ $minKey: 1 }, 1000, 2000]);
    expect(chunks[1]!.shard).toBe(result.recipient);
    expect(chunks[0]!.shard).toBe(result.donor);
    expect(chunks[2]!.shard).toBe(result.donor);
    expect(result.documentsCloned).toBe(1000);
    expect(result.phases.map((p) => p.phase)).toEqual([
      'registered',
      'cloning',
      'steady',
      'criticalSection',
      'recipientCommitted',
      'committed',
      'released',
      'rangeDeletionScheduled',
    ]);
    const reported = await eventually(async () => {
      const phases = await changelog('moveChunk.phase', ns);
      return phases.length === 8 ? phases : undefined;
    }, 'the phases in the changelog');
    expect(reported.map((p) => p.phase)).toEqual(result.phases.map((p) => p.phase));
    expect(await changelog('moveChunk.commit', ns)).toHaveLength(1);
  });

  it('leaves each document stored once, on its owner, after the range deletion (waitForDelete)', async () => {
    expect(await storedCount(cluster, result.recipient, ns)).toBe(1000);
    expect(await storedCount(cluster, result.donor, ns)).toBe(2000);
    const all = await api.findAll(ns, { filter: {} });
    expect(all).toHaveLength(3000);
    expect(new Set(all.map((d) => (d as { _id: number })._id)).size).toBe(3000);
  });

  it('builds the secondary indexes on the recipient, and they answer', async () => {
    const found = await api.findAll(ns, { filter: { y: 5 } });
    expect(found).toHaveLength(docs.filter((d) => d.y === 5).length);
    const listed = await api.call('GET', '/v1/mig/basic/indexes');
    expect(JSON.stringify(listed.json)).toContain('y_1');
  });

  it('refuses a chunk over twice the max chunk size unless forceJumbo', async () => {
    const small = 'mig.jumbo';
    await config.shardCollection({ ns: small, key: { x: 1 } });
    await onShardDatabase(cluster, 'config', (pool) => pool.query('UPDATE collections SET max_chunk_size_bytes = 10000 WHERE ns = $1', [small]));
    await insert(small, docs.slice(0, 300));
    const [chunk] = await placement(small);
    const target = ['shard0', 'shard1', 'shard2'].find((s) => s !== chunk!.shard)!;
    const refused = await errorOf(config.moveRange({ ns: small, min: { x: { $minKey: 1 } }, toShard: target }));
    expect(refused).toMatchObject({ code: 'CHUNK_TOO_BIG' });
    const forced = await config.moveRange({ ns: small, min: { x: { $minKey: 1 } }, toShard: target, forceJumbo: true });
    expect(forced.documentsCloned).toBe(300);
    expect(await api.findAll(small, { filter: {} })).toHaveLength(300);
  });

  it('rejects bad requests with clear errors', async () => {
    expect(await errorOf(config.moveRange({ ns, min: { x: 1500 }, toShard: 'shard0' }))).toMatchObject({ code: 'BAD_VALUE' });
    expect(await errorOf(config.moveRange({ ns, min: { x: 2000 }, toShard: 'nope' }))).toMatchObject({ code: 'SHARD_NOT_FOUND' });
    expect(await errorOf(config.moveRange({ ns, min: { x: 0 }, max: { x: 2500 }, toShard: 'shard0' }))).toMatchObject({ code: 'BAD_VALUE' });
    expect(await errorOf(config.moveRange({ ns: 'mig.none', min: { x: 0 }, toShard: 'shard0' }))).toMatchObject({ code: 'NAMESPACE_NOT_FOUND' });
  });
});
