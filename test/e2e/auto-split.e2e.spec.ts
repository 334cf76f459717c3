import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConfigClient } from '@tessera/protocol';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';
import { FAST_CONFIG_ENV, errorOf, eventually, waitForLeader } from './helpers.js';
import type { RouterApi } from './router-api.js';
import { rootApi, startTestCluster } from './test-cluster.js';

let cluster: LocalCluster;
let dispose: () => Promise<void>;
let config: ConfigClient;
let api: RouterApi;

beforeAll(async () => {
  ({ cluster, dispose } = await startTestCluster({ shards: 2, routers: 1, env: FAST_CONFIG_ENV }));
  config = cluster.configClient();
  api = rootApi(cluster);
  await waitForLeader(config);
});

afterAll(async () => {
  await api?.close();
  await dispose?.();
});

const CHUNK_SIZE = 64 * 1024;
const pad = 'p'.repeat(400);

async function setChunkSize(ns: string, bytes: number): Promise<void> {
  await config.configureCollectionBalancing({ ns, chunkSizeBytes: bytes });
}

describe('auto-splitting', () => {
  it('splits the top chunk at its highest key, so the new top chunk is small (the top-chunk optimization)', async () => {
    const ns = 'split.top';
    await config.shardCollection({ ns, key: { x: 1 } });
    await setChunkSize(ns, CHUNK_SIZE);
    // A first write makes the shard read the collection's chunk size; the next batch passes a fifth of it.
    await api.call('POST', '/v1/split/top/insert', { documents: [{ _id: 0, x: 0, pad }] });
    await new Promise((resolve) => setTimeout(resolve, 500));
    const documents = Array.from({ length: 199 }, (_, i) => ({ _id: i + 1, x: i + 1, pad }));
    expect((await api.call('POST', '/v1/split/top/insert', { documents })).json).toMatchObject({ insertedCount: 199 });
    const chunks = await eventually(async () => {
      const current = (await config.getChunks({ ns })).chunks;
      return current.length > 1 ? current : undefined;
    }, 'the top chunk to be split');
    expect(chunks[chunks.length - 1]!.range.min).toEqual([199]);
  });

  it('keeps splitting under a stream of increasing keys, and every document stays readable once', async () => {
    const ns = 'split.monotonic';
    await config.shardCollection({ ns, key: { x: 1 } });
    await setChunkSize(ns, CHUNK_SIZE);
    // ~1 MB of increasing keys, in batches, so writes keep landing in the top chunk.
    for (let batch = 0; batch < 25; batch++) {
      const documents = Array.from({ length: 100 }, (_, i) => ({ _id: batch * 100 + i, x: batch * 100 + i, pad }));
      const answer = await api.call('POST', '/v1/split/monotonic/insert', { documents });
      expect(answer.json).toMatchObject({ insertedCount: 100 });
    }
    await eventually(async () => ((await config.getChunks({ ns })).chunks.length >= 8 ? true : undefined), 'the collection to be split');
    const all = await api.findAll(ns, { filter: {} });
    expect(all).toHaveLength(2500);
    expect(new Set(all.map((d) => (d as { _id: number })._id)).size).toBe(2500);
  });

  it('marks a chunk whose documents all share one shard key jumbo instead of splitting it', async () => {
    const ns = 'split.samekey';
    await config.shardCollection({ ns, key: { x: 1 } });
    await setChunkSize(ns, CHUNK_SIZE);
    for (let batch = 0; batch < 5; batch++) {
      const documents = Array.from({ length: 100 }, (_, i) => ({ _id: batch * 100 + i, x: 7, pad }));
      await api.call('POST', '/v1/split/samekey/insert', { documents });
    }
    await eventually(async () => ((await config.getChunks({ ns })).chunks.some((c) => c.jumbo) ? true : undefined), 'the jumbo flag');
    expect((await config.getChunks({ ns })).chunks).toHaveLength(1);
  });

  it('stops when the cluster turns auto-split off, and refuses a chunk size under 64 KiB', async () => {
    expect(await errorOf(config.configureCollectionBalancing({ ns: 'split.samekey', chunkSizeBytes: 1000 }))).toMatchObject({
      code: 'BAD_VALUE',
    });
    expect(await errorOf(config.configureCollectionBalancing({ ns: 'split.none', chunkSizeBytes: 65536 }))).toMatchObject({
      code: 'NAMESPACE_NOT_FOUND',
    });
    expect((await config.updateSettings({ autoSplit: false })).autoSplit).toBe(false);
    const ns = 'split.off';
    await config.shardCollection({ ns, key: { x: 1 } });
    await setChunkSize(ns, CHUNK_SIZE);
    // The shards reread the setting within 10 s; wait that out before writing.
    await new Promise((resolve) => setTimeout(resolve, 10_500));
    for (let batch = 0; batch < 10; batch++) {
      const documents = Array.from({ length: 100 }, (_, i) => ({ _id: batch * 100 + i, x: batch * 100 + i, pad }));
      await api.call('POST', '/v1/split/off/insert', { documents });
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect((await config.getChunks({ ns })).chunks).toHaveLength(1);
    await config.updateSettings({ autoSplit: true });
  }, 30_000);
});
