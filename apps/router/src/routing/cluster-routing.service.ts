import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type { Logger } from 'pino';
import { type ChunkVersion, type DatabaseVersion, TesseraError, UNSHARDED_VERSION } from '@tessera/core';
import type { ConfigClient, ShardClient } from '@tessera/protocol';
import { InternalClients, LOGGER, type Periodic, SETTINGS, VectorClockService, runPeriodically } from '@tessera/platform';
import { CatalogCache, SHARD_REGISTRY_RELOAD_MS, ShardRegistry, markStale } from '@tessera/routing';
import type { RouterSettings } from '../router.settings.js';
import { databaseOf } from '../api/namespace.js';
import type { WriteRouting } from '../writes/write-targeting.js';

/** What a versioned command to one shard carries for a namespace. */
export interface ShardVersioning {
  shardVersion: ChunkVersion;
  databaseVersion?: DatabaseVersion;
}

/** A collection's routing as the router uses it: targeting input plus each shard's versions. */
export type CollectionRouting = WriteRouting & { versioningFor(shard: string): ShardVersioning };

/**
 * The router's view of the cluster: the routing table cache and the shard registry, both fed
 * by the config server, and one `ShardClient` per shard URL. The registry reloads every 30 s,
 * for an unknown shard, and when the gossiped TopologyTime moves.
 */
@Injectable()
export class ClusterRoutingService implements OnApplicationBootstrap, OnApplicationShutdown {
  readonly cache: CatalogCache;
  private readonly config: ConfigClient;
  private readonly registry: ShardRegistry;
  private readonly clients = new Map<string, ShardClient>();
  private loop: Periodic | undefined;

  constructor(
    @Inject(SETTINGS) settings: RouterSettings,
    @Inject(LOGGER) private readonly logger: Logger,
    private readonly internal: InternalClients,
    clock: VectorClockService,
  ) {
    this.config = internal.config(settings.TESSERA_CONFIG_URL);
    this.cache = new CatalogCache(this.config, (kind, ns) => this.logger.debug({ kind, ns }, 'routing table refreshed'), true);
    this.registry = new ShardRegistry(this.config, () => clock.now().topologyTime);
  }

  onApplicationBootstrap(): void {
    this.loop = runPeriodically(
      () => this.registry.reload(),
      SHARD_REGISTRY_RELOAD_MS,
      (error) => this.logger.warn({ err: error }, `shard registry reload failed: ${(error as Error).message}`),
    );
  }

  onApplicationShutdown(): void {
    this.loop?.stop();
  }

  /** The client of a shard, by name (through the registry). */
  async shard(name: string): Promise<ShardClient> {
    const { url } = await this.registry.getShard(name);
    let client = this.clients.get(url);
    if (client === undefined) this.clients.set(url, (client = this.internal.shard(url)));
    return client;
  }

  /** The names of every shard in the registry (what a broadcast DDL reaches). */
  async allShardNames(): Promise<string[]> {
    return (await this.registry.allShards()).map((s) => s.name).sort();
  }

  /** How `ns` is routed now. Throws `NAMESPACE_NOT_FOUND` when its database does not exist. */
  async routing(ns: string): Promise<CollectionRouting> {
    const info = await this.cache.getCollectionRoutingInfo(ns);
    if (info.kind === 'sharded') {
      const table = info.table;
      return {
        kind: 'sharded',
        ns,
        table,
        pattern: info.keyPattern,
        versioningFor: (shard) => ({ shardVersion: table.shardVersion(shard) }),
      };
    }
    const database = info.database;
    return {
      kind: 'unsharded',
      ns,
      primaryShard: database.primaryShard,
      versioningFor: () => ({ shardVersion: UNSHARDED_VERSION, databaseVersion: database.version }),
    };
  }

  /**
   * Routing for a write: a database that does not exist is created first (implicit creation,
   * as MongoDB on first write), so the write goes to its new primary shard as unsharded; the
   * shard creates the collection on its first insert.
   */
  async routingForWrite(ns: string): Promise<CollectionRouting> {
    try {
      return await this.routing(ns);
    } catch (error) {
      if (!(error instanceof TesseraError) || error.code !== 'NAMESPACE_NOT_FOUND') throw error;
      await this.config.enableSharding({ db: databaseOf(ns) });
      this.cache.markDatabaseStale(databaseOf(ns));
      return this.routing(ns);
    }
  }

  /** Renames an unsharded collection within its database: the config server's renameCollection coordinator. */
  renameCollection(from: string, to: string, dropTarget: boolean): Promise<{ ok: 1 }> {
    return this.config.renameCollection({ from, to, dropTarget });
  }

  /** Drops a collection: the config server's dropCollection coordinator. */
  async dropCollection(ns: string): Promise<void> {
    await this.config.dropCollection({ ns });
  }

  /** Routing for a read, or `undefined` when the database does not exist (reads of it are empty). */
  async routingForRead(ns: string): Promise<CollectionRouting | undefined> {
    try {
      return await this.routing(ns);
    } catch (error) {
      if (error instanceof TesseraError && error.code === 'NAMESPACE_NOT_FOUND') return undefined;
      throw error;
    }
  }

  /**
   * Marks the cache stale when `error` is a stale-routing answer; returns whether it was
   * (libs/routing `markStale`), for callers that retry part of a batch.
   */
  handleStale(ns: string, error: unknown): boolean {
    return markStale(this.cache, ns, error);
  }

  /**
   * Runs a transaction's statement, which is not retried on stale routing (its participants have
   * aborted), but marks the cache stale so that the transaction's retry routes afresh.
   */
  async markingStale<T>(ns: string, work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      this.handleStale(ns, error);
      throw error;
    }
  }
}
