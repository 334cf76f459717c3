/**
 * The round's snapshot reads the shards' bytes at most once per refresh interval and moves them
 * by the balancer's own migrations in between.
 */
import type { Logger } from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DEFAULT_CLUSTER_SETTINGS } from '@tessera/protocol';
import type { InternalClients } from '@tessera/platform';
import type { CollectionRow } from '../catalog/catalog-rows.js';
import type { BalancerCatalogStore, ShardRow } from './balancer-catalog.store.js';
import { ClusterStatisticsService } from './cluster-statistics.service.js';

const REFRESH_MS = 10_000;
const row: CollectionRow = {
  ns: 'db.c',
  db: 'db',
  uuid: 'u1',
  epoch: 'e'.repeat(24),
  timestamp_t: '10',
  timestamp_i: '1',
  key_pattern: { x: 1 },
  is_unique: false,
  max_chunk_size_bytes: null,
  balancing_enabled: true,
  auto_merging_enabled: true,
  defragment_collection: false,
  defragmentation_state: null,
  allow_migrations: true,
  created_at: new Date(0),
  updated_at: new Date(0),
};

function statistics() {
  const shards: ShardRow[] = [
    { name: 's0', url: 'http://s0', state: 'active', zones: [] },
    { name: 's1', url: 'http://s1', state: 'active', zones: [] },
  ];
  const stored: Record<string, number> = { s0: 900, s1: 100 };
  const reads: string[] = [];
  let collection = row;
  const catalog: Pick<BalancerCatalogStore, 'shards' | 'balancedCollections' | 'chunks' | 'zones'> = {
    shards: async () => shards,
    balancedCollections: async () => [collection],
    chunks: async () => [],
    zones: async () => [],
  };
  const clients = {
    migration: (url: string) => ({
      statsForBalancing: async ({ namespaces }: { namespaces: string[] }) => {
        const shard = shards.find((s) => s.url === url)!.name;
        reads.push(shard);
        return { stats: namespaces.map((ns) => ({ ns, collSize: stored[shard] ?? 0 })) };
      },
    }),
  };
  const service = new ClusterStatisticsService(
    catalog as BalancerCatalogStore,
    clients as unknown as InternalClients,
    { warn: () => undefined } as unknown as Logger,
    { TESSERA_BALANCER_STATS_REFRESH_MS: REFRESH_MS },
  );
  const bytes = async () => (await service.roundSnapshot(DEFAULT_CLUSTER_SETTINGS)).collections[0]!.distribution.shardDataSizeBytes;
  return {
    service,
    shards,
    stored,
    reads,
    bytes,
    recreate: () => (collection = { ...row, uuid: 'u2' }),
  };
}

describe("the round's snapshot of the shards' bytes", () => {
  beforeEach(() => void vi.useFakeTimers({ toFake: ['Date'] }));
  afterEach(() => void vi.useRealTimers());

  it('reads each shard once per refresh interval, moving the bytes by the balancer migrations in between', async () => {
    const { service, stored, reads, bytes } = statistics();
    expect(await bytes()).toEqual({ s0: 900, s1: 100 });
    expect(reads).toHaveLength(2);

    service.noteMigration('db.c', 's0', 's1', 300);
    stored.s0 = 999; // a foreground write: seen at the next read only
    vi.advanceTimersByTime(REFRESH_MS - 1);
    expect(await bytes()).toEqual({ s0: 600, s1: 400 });
    expect(reads).toHaveLength(2);

    vi.advanceTimersByTime(2);
    expect(await bytes()).toEqual({ s0: 999, s1: 100 });
    expect(reads).toHaveLength(4);
  });

  it('never moves more than the donor was known to hold', async () => {
    const { service, bytes } = statistics();
    await bytes();
    service.noteMigration('db.c', 's1', 's0', 5_000);
    expect(await bytes()).toEqual({ s0: 1000, s1: 0 });
  });

  it('reads again at once when the shards or the collection changed', async () => {
    const { shards, reads, bytes, recreate } = statistics();
    await bytes();
    shards.push({ name: 's2', url: 'http://s2', state: 'active', zones: [] });
    expect(await bytes()).toEqual({ s0: 900, s1: 100, s2: 0 });
    expect(reads).toHaveLength(5);
    recreate();
    await bytes();
    expect(reads).toHaveLength(8);
  });

  it("asks the shards every time for balancerCollectionStatus's distribution", async () => {
    const { service, shards, reads, bytes } = statistics();
    await bytes();
    await service.distribution(row, DEFAULT_CLUSTER_SETTINGS, shards);
    expect(reads).toHaveLength(4);
  });
});
