import { describe, expect, it } from 'vitest';
import type { ClusterTimestamp } from '@tessera/core';
import type { ShardDescription } from '@tessera/protocol';
import { ShardRegistry } from './shard-registry.js';

function shard(name: string): ShardDescription {
  return { name, url: `http://${name}:1`, state: 'active', zones: [], addedAt: '', reachable: true, lastSeenAt: null, lastError: null };
}

function setup() {
  const source = {
    shards: [shard('a')],
    calls: 0,
    async listShards() {
      this.calls++;
      await new Promise((resolve) => setTimeout(resolve, 5));
      return this.shards;
    },
  };
  let topology: ClusterTimestamp = { t: 1, i: 1 };
  const registry = new ShardRegistry(source, () => topology);
  return { source, registry, advance: (t: ClusterTimestamp) => (topology = t) };
}

describe('the shard registry', () => {
  it('loads once, then answers from memory while the topology stands still', async () => {
    const { source, registry } = setup();
    await Promise.all([registry.getShard('a'), registry.getShard('a'), registry.allShards()]);
    expect(source.calls).toBe(1);
  });

  it('reloads for a shard it does not know, and answers SHARD_NOT_FOUND if it still is not there', async () => {
    const { source, registry } = setup();
    await registry.getShard('a');
    source.shards = [shard('a'), shard('b')];
    expect((await registry.getShard('b')).url).toBe('http://b:1');
    await expect(registry.getShard('zz')).rejects.toMatchObject({ code: 'SHARD_NOT_FOUND' });
    expect(source.calls).toBe(3);
  });

  it('reloads when the gossiped TopologyTime moves past the one it loaded at', async () => {
    const { source, registry, advance } = setup();
    await registry.allShards();
    source.shards = [shard('b')];
    advance({ t: 1, i: 2 });
    expect((await registry.allShards()).map((s) => s.name)).toEqual(['b']);
    expect(source.calls).toBe(2);
  });
});
