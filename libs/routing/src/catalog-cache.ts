import {
  type ChunkVersion,
  RoutingTable,
  type ShardKeyPattern,
  TesseraError,
  compareChunkVersions,
  parseShardKeyPattern,
} from '@tessera/core';
import { type CatalogDatabase, type GetChunksRequest, type GetChunksResult, chunkFromWire } from '@tessera/protocol';

/** Where routing information comes from: the config server (`ConfigClient` fits). */
export interface CatalogSource {
  getDatabase(name: string): Promise<CatalogDatabase>;
  getChunks(request: GetChunksRequest): Promise<GetChunksResult>;
}

/** How a namespace is routed: by its chunks, or to its database's primary shard. */
export type CollectionRoutingInfo =
  | {
      kind: 'sharded';
      ns: string;
      uuid: string;
      keyPattern: ShardKeyPattern;
      keyPatternObject: Record<string, 1 | 'hashed'>;
      table: RoutingTable;
    }
  | { kind: 'unsharded'; ns: string; database: CatalogDatabase };

/** What a refresh did, for metrics and tests. */
export type RefreshKind = 'full' | 'incremental' | 'unsharded' | 'database';

interface Entry<T> {
  value?: T;
  stale: boolean;
  refreshing?: Promise<T>;
}

/**
 * Attempts of one refresh (sharding-internals.md, "Operational Caveats": "it will retry up to
 * twice before giving up and returning stale information"), on retryable errors only.
 */
export const REFRESH_ATTEMPTS = 3;
/** The pause before attempt n + 1 is n times this. */
const REFRESH_RETRY_MS = 50;

function isRetryable(error: unknown): boolean {
  return error instanceof TesseraError && error.retryable;
}

async function loadRetrying<T>(load: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await load();
    } catch (error) {
      if (attempt >= REFRESH_ATTEMPTS || !isRetryable(error)) throw error;
      await new Promise((resolve) => setTimeout(resolve, REFRESH_RETRY_MS * attempt));
    }
  }
}

/**
 * The routing table cache (sharding-internals.md, "The routing table cache"): lazy, it loads a
 * namespace on first use and again only when marked stale (after a `STALE_CONFIG`); a refresh
 * asks only for chunks newer than the cached collection version and applies them, unless the
 * epoch changed or the delta does not fit, when it reloads everything. Concurrent callers of a
 * namespace being refreshed wait for that one refresh instead of starting their own. A refresh
 * that fails with a retryable error is tried again (`REFRESH_ATTEMPTS`), then, in a router's
 * cache (`staleOnFailure`), answers the stale information when there is some.
 */
export class CatalogCache {
  private readonly collections = new Map<string, Entry<CollectionRoutingInfo>>();
  private readonly databases = new Map<string, Entry<CatalogDatabase>>();

  constructor(
    private readonly source: CatalogSource,
    private readonly onRefresh: (kind: RefreshKind, ns: string) => void = () => undefined,
    /**
     * Answer the stale information when every attempt of a refresh failed (a router's cache:
     * shards check every request's version). Never for a shard's filtering metadata, which must
     * not admit writes by an ownership it may have lost.
     */
    private readonly staleOnFailure = false,
  ) {}

  /** The database's primary shard and version; `NAMESPACE_NOT_FOUND` if it does not exist. */
  getDatabase(name: string): Promise<CatalogDatabase> {
    return this.read(this.databases, name, async () => {
      const database = await this.source.getDatabase(name);
      this.onRefresh('database', name);
      return database;
    });
  }

  /** How `ns` is routed now, refreshing first if it is unknown or stale. */
  getCollectionRoutingInfo(ns: string): Promise<CollectionRoutingInfo> {
    return this.read(this.collections, ns, () => this.refreshCollection(ns));
  }

  /**
   * Marks a namespace stale so its next use refreshes. With `wanted`, a version that is known to
   * be current, a cache that already has it is left alone: the collection version when `shard`
   * is not given (cached same or newer), else that shard's version (cached equal), which is what
   * a shard reports in `STALE_CONFIG`.
   */
  markCollectionStale(ns: string, wanted?: ChunkVersion, shard?: string): void {
    const entry = this.collections.get(ns);
    if (entry === undefined) return;
    const cached = entry.value;
    if (wanted !== undefined && cached?.kind === 'sharded') {
      if (shard === undefined) {
        const relation = compareChunkVersions(cached.table.collectionVersion, wanted);
        if (relation === 'same' || relation === 'newer') return;
      } else if (compareChunkVersions(cached.table.shardVersion(shard), wanted) === 'same') {
        return;
      }
    }
    entry.stale = true;
  }

  /** Marks a database stale (after `STALE_DB_VERSION`), and its unsharded namespaces with it. */
  markDatabaseStale(name: string): void {
    const entry = this.databases.get(name);
    if (entry !== undefined) entry.stale = true;
    for (const collection of this.collections.values()) {
      if (collection.value?.kind === 'unsharded' && collection.value.database.name === name) collection.stale = true;
    }
  }

  private async read<T>(map: Map<string, Entry<T>>, key: string, load: () => Promise<T>): Promise<T> {
    let entry = map.get(key);
    if (entry === undefined) {
      entry = { stale: true };
      map.set(key, entry);
    }
    if (!entry.stale && entry.value !== undefined) return entry.value;
    if (entry.refreshing !== undefined) return entry.refreshing;
    const current = entry;
    current.stale = false;
    const refreshing = loadRetrying(load).then(
      (value) => {
        current.value = value;
        current.refreshing = undefined;
        return value;
      },
      (error: unknown) => {
        current.stale = true;
        current.refreshing = undefined;
        // The reference's caveat: a refresh that keeps failing answers the stale information,
        // still marked stale; a shard refuses it if it is really behind (STALE_CONFIG).
        if (this.staleOnFailure && current.value !== undefined && isRetryable(error)) return current.value;
        throw error;
      },
    );
    current.refreshing = refreshing;
    return refreshing;
  }

  private async refreshCollection(ns: string): Promise<CollectionRoutingInfo> {
    const cached = this.collections.get(ns)?.value;
    const since = cached?.kind === 'sharded' ? cached.table.collectionVersion : undefined;
    let result: GetChunksResult;
    try {
      result = await this.source.getChunks({ ns, ...(since ? { sinceVersion: since } : {}) });
    } catch (error) {
      if (!(error instanceof TesseraError) || error.code !== 'NAMESPACE_NOT_FOUND') throw error;
      const database = await this.getDatabaseFresh(ns.slice(0, ns.indexOf('.')));
      this.onRefresh('unsharded', ns);
      return { kind: 'unsharded', ns, database };
    }
    if (!result.full && cached?.kind === 'sharded') {
      try {
        const table = cached.table.applyChanges(result.chunks.map(chunkFromWire));
        this.onRefresh('incremental', ns);
        return { ...cached, table };
      } catch (error) {
        if (!(error instanceof TesseraError)) throw error;
        // The delta did not fit the cached table: start again from everything.
        result = await this.source.getChunks({ ns });
      }
    }
    this.onRefresh('full', ns);
    return {
      kind: 'sharded',
      ns,
      uuid: result.uuid,
      keyPattern: parseShardKeyPattern(result.keyPattern),
      keyPatternObject: result.keyPattern,
      table: RoutingTable.fromChunks(result.chunks.map(chunkFromWire)),
    };
  }

  /** An unsharded namespace always reads its database again: its routing is the database's. */
  private async getDatabaseFresh(name: string): Promise<CatalogDatabase> {
    const entry = this.databases.get(name);
    if (entry !== undefined) entry.stale = true;
    return this.getDatabase(name);
  }
}
