import { type ClusterTimestamp, TesseraError, compareClusterTimestamps } from '@tessera/core';
import type { ShardDescription } from '@tessera/protocol';

/** Where the shard list comes from: the config server (`ConfigClient` fits). */
export interface ShardSource {
  listShards(): Promise<ShardDescription[]>;
}

/** Default period of the background reload, as MongoDB's ShardRegistry. */
export const SHARD_REGISTRY_RELOAD_MS = 30_000;

/**
 * The shard registry (sharding-internals.md, "The shard registry"): an in-memory copy of the
 * config server's shard list. It reloads on first use, on the periodic tick its owner drives,
 * when asked for a shard it does not know, and when the TopologyTime this node has seen moved
 * past the one it loaded at. Concurrent reloads share one request.
 */
export class ShardRegistry {
  private shards = new Map<string, ShardDescription>();
  private loadedAt: ClusterTimestamp | undefined;
  private loading: Promise<void> | undefined;

  constructor(
    private readonly source: ShardSource,
    private readonly topologyTime: () => ClusterTimestamp,
  ) {}

  /** The shard's description; `SHARD_NOT_FOUND` if even a fresh list does not have it. */
  async getShard(name: string): Promise<ShardDescription> {
    if (this.needsReload()) await this.reload();
    let shard = this.shards.get(name);
    if (shard === undefined) {
      await this.reload();
      shard = this.shards.get(name);
    }
    if (shard === undefined)
      throw new TesseraError('SHARD_NOT_FOUND', `no shard named "${name}" in the cluster`, { details: { shard: name } });
    return shard;
  }

  /** Every shard, reloaded first if the topology moved on. */
  async allShards(): Promise<ShardDescription[]> {
    if (this.needsReload()) await this.reload();
    return [...this.shards.values()];
  }

  /** Loads the list again (one request however many callers ask at once). */
  reload(): Promise<void> {
    this.loading ??= (async () => {
      const seen = this.topologyTime();
      try {
        const shards = await this.source.listShards();
        this.shards = new Map(shards.map((s) => [s.name, s]));
        this.loadedAt = seen;
      } finally {
        this.loading = undefined;
      }
    })();
    return this.loading;
  }

  private needsReload(): boolean {
    return this.loadedAt === undefined || compareClusterTimestamps(this.topologyTime(), this.loadedAt) > 0;
  }
}
