import {
  type ChunkRange,
  type ChunkVersion,
  type ClusterTimestamp,
  type DatabaseVersion,
  TesseraError,
  UNSHARDED_VERSION,
  chunkVersionToString,
  compareChunkVersions,
  compareDatabaseVersions,
  databaseVersionToString,
  isIgnoredVersion,
  isPlacementCompatible,
} from '@tessera/core';
import type { CatalogCache, CollectionRoutingInfo } from '@tessera/routing';

/** What a shard serves a request with: the routing info it checked, and which keys it owns. */
export interface FilteringMetadata {
  info: CollectionRoutingInfo;
  shardVersion: ChunkVersion;
  /** True when this shard owns the document with this encoded shard key (orphans are false). */
  owns(encodedKey: Uint8Array): boolean;
  /**
   * `owns` at a past ClusterTime, from the chunks' placement history (a snapshot read's orphan
   * filter). Throws `STALE_CHUNK_HISTORY` when the chunk's history does not reach back that far.
   */
  ownsAt(encodedKey: Uint8Array, atClusterTime: ClusterTimestamp): boolean;
  /** The key ranges `owns` is true for, now: every key ('all'), none, or these chunks' ranges. */
  ownedRanges(): 'all' | 'none' | readonly ChunkRange[];
}

/**
 * A shard's view of placement (MongoDB's CollectionShardingRuntime and DatabaseShardingState):
 * it checks the version a router sent against its own and answers `STALE_CONFIG` /
 * `STALE_DB_VERSION` with both versions on a mismatch. A shard version matches when it is
 * placement-compatible (`isPlacementCompatible`: same major), so splits and merges the router
 * has not seen send nobody back. When the router is ahead, the shard is
 * the one behind: it refreshes from the config server first, and fails only if it still
 * disagrees. Queries take the metadata once, at their start, and filter orphans with it, so a
 * query keeps one ownership view for its whole life.
 */
export class ShardingState {
  constructor(
    readonly shardName: string,
    private readonly cache: CatalogCache,
  ) {}

  /**
   * Checks `received` (the router's shard version for this shard; `UNSHARDED_VERSION` for a
   * collection it believes unsharded) and returns the metadata to serve the request with.
   */
  async checkShardVersion(ns: string, received: ChunkVersion): Promise<FilteringMetadata> {
    let metadata = await this.metadata(ns);
    if (isIgnoredVersion(received) || isPlacementCompatible(received, metadata.shardVersion)) return metadata;
    const relation = compareChunkVersions(received, metadata.shardVersion);
    if (relation === 'newer' || relation === 'differentGeneration') {
      this.cache.markCollectionStale(ns, received);
      metadata = await this.metadata(ns);
    }
    if (!isPlacementCompatible(received, metadata.shardVersion)) {
      throw new TesseraError(
        'STALE_CONFIG',
        `shard ${this.shardName} has version ${chunkVersionToString(metadata.shardVersion)} of ${ns}, the request was sent with ${chunkVersionToString(received)}`,
        { details: { namespace: ns, shard: this.shardName, received, wanted: metadata.shardVersion } },
      );
    }
    return metadata;
  }

  /** Checks the database version of a request for an unsharded collection. */
  async checkDatabaseVersion(db: string, received: DatabaseVersion): Promise<void> {
    let current = (await this.cache.getDatabase(db)).version;
    let relation = compareDatabaseVersions(received, current);
    if (relation === 'newer' || relation === 'differentGeneration') {
      this.cache.markDatabaseStale(db);
      current = (await this.cache.getDatabase(db)).version;
      relation = compareDatabaseVersions(received, current);
    }
    if (relation !== 'same') {
      throw new TesseraError(
        'STALE_DB_VERSION',
        `shard ${this.shardName} has database version ${databaseVersionToString(current)} of ${db}, the request was sent with ${databaseVersionToString(received)}`,
        {
          details: { db, shard: this.shardName, received, wanted: current },
        },
      );
    }
  }

  /** The primary shard of `db` as the catalog names it now (refreshed first). */
  async refreshedPrimaryShardOf(db: string): Promise<string> {
    this.cache.markDatabaseStale(db);
    return (await this.cache.getDatabase(db)).primaryShard;
  }

  /** Forgets what it knows of database `db`, e.g. after a movePrimary commit it took part in. */
  invalidateDatabase(db: string): void {
    this.cache.markDatabaseStale(db);
  }

  /** Forgets what it knows of `ns`, e.g. after a migration commit it took part in. */
  invalidate(ns: string): void {
    this.cache.markCollectionStale(ns);
  }

  private async metadata(ns: string): Promise<FilteringMetadata> {
    const info = await this.cache.getCollectionRoutingInfo(ns);
    if (info.kind === 'unsharded') {
      const isPrimary = info.database.primaryShard === this.shardName;
      return {
        info,
        shardVersion: UNSHARDED_VERSION,
        owns: () => isPrimary,
        ownsAt: () => isPrimary,
        ownedRanges: () => (isPrimary ? 'all' : 'none'),
      };
    }
    const table = info.table;
    const shard = this.shardName;
    return {
      info,
      shardVersion: table.shardVersion(shard),
      owns: (encodedKey) => table.chunkFor(encodedKey).shard === shard,
      ownsAt: (encodedKey, atClusterTime) => table.chunkFor(encodedKey, atClusterTime).shard === shard,
      ownedRanges: () => table.chunksOnShard(shard).map((chunk) => chunk.range),
    };
  }
}
