import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import type { CollectionDistribution } from '@tessera/core';
import type { ClusterSettings } from '@tessera/protocol';
import { InternalClients, LOGGER } from '@tessera/platform';
import { type CollectionRow, generationOfRow, keyPatternOfRow } from '../catalog/catalog-rows.js';
import { type Snapshot, errorEntry } from './balancer-round.js';
import { BalancerCatalogStore, type ShardRow } from './balancer-catalog.store.js';

/**
 * A shard may estimate its bytes of a collection with a standard error of this fraction of the
 * collection's max chunk size (a tenth): the balancer moves chunks when two shards differ by 3
 * chunks, some 20 standard errors of their difference, so sampling never tips a decision.
 */
const SIZE_TOLERANCE_CHUNKS = 10;
/** Namespaces per `statsForBalancing` request (the request's own bound). */
const STATS_BATCH = 10_000;

/**
 * What the balancer's policies read (MongoDB's ClusterStatistics and
 * CollectionDataSizeInfoForBalancing): the shards, each collection's chunks and zones from the
 * catalog (`BalancerCatalogStore`), its max chunk size, and each shard's bytes of it from the
 * shards' `statsForBalancing`.
 */
@Injectable()
export class ClusterStatisticsService {
  constructor(
    private readonly catalog: BalancerCatalogStore,
    private readonly clients: InternalClients,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  /**
   * A round's snapshot: the shards, and each collection the balancer looks at with its
   * distribution. A shard that does not answer its statsForBalancing leaves every collection out
   * of the round, each with the error.
   */
  async roundSnapshot(settings: ClusterSettings): Promise<Snapshot> {
    const shards = await this.catalog.shards();
    const rows = await this.catalog.balancedCollections();
    try {
      const distributions = await this.distributions(rows, settings, shards);
      const collections = rows.map((row, i) => ({
        row,
        distribution: distributions[i]!,
        pattern: keyPatternOfRow(row),
        generation: generationOfRow(row),
      }));
      return { shards, collections, errors: [] };
    } catch (error) {
      this.logger.warn({ err: error }, `balancer skips this round's collections: ${(error as Error).message}`);
      return { shards, collections: [], errors: rows.map((row) => errorEntry(row.ns, error)) };
    }
  }

  /** The snapshot with the chunks of `namespaces` read again (after splits; the shards' bytes have not changed). */
  async withChunksReread(snapshot: Snapshot, namespaces: ReadonlySet<string>): Promise<Snapshot> {
    const collections = await Promise.all(
      snapshot.collections.map(async (c) =>
        namespaces.has(c.row.ns) ? { ...c, distribution: { ...c.distribution, chunks: await this.catalog.chunks(c.row) } } : c,
      ),
    );
    return { ...snapshot, collections };
  }

  /** One collection's distribution (as `distributions`). */
  async distribution(
    row: CollectionRow,
    settings: ClusterSettings,
    shards: readonly ShardRow[],
    extra: Pick<CollectionDistribution, 'chunkCountBalancingInProgress'> = {},
  ): Promise<CollectionDistribution> {
    return (await this.distributions([row], settings, shards, () => extra))[0]!;
  }

  /**
   * Each collection's distribution: chunks, zones, chunk size and each shard's bytes of it, from
   * one `statsForBalancing` per shard for all the collections. Throws when a shard does not answer.
   */
  async distributions(
    rows: readonly CollectionRow[],
    settings: ClusterSettings,
    shards: readonly ShardRow[],
    extra: (row: CollectionRow) => Pick<CollectionDistribution, 'chunkCountBalancingInProgress'> = () => ({}),
  ): Promise<CollectionDistribution[]> {
    const owned = await this.ownedBytes(
      shards,
      rows.map((r) => r.ns),
      Object.fromEntries(rows.map((r) => [r.ns, Math.floor(maxChunkSizeBytesOf(r, settings) / SIZE_TOLERANCE_CHUNKS)])),
    );
    return Promise.all(
      rows.map(async (row) => ({
        namespace: row.ns,
        chunks: await this.catalog.chunks(row),
        zones: await this.catalog.zones(row.ns),
        maxChunkSizeBytes: maxChunkSizeBytesOf(row, settings),
        shardDataSizeBytes: owned.get(row.ns)!,
        balancingEnabled: row.balancing_enabled,
        ...extra(row),
      })),
    );
  }

  /**
   * The bytes each shard owns of each of `namespaces` (ns → shard → bytes), by the shards'
   * `statsForBalancing`: orphans waiting to be cleaned do not count (MongoDB's numOrphanDocs do
   * not). One request per shard for up to STATS_BATCH namespaces.
   */
  private async ownedBytes(
    shards: readonly ShardRow[],
    namespaces: readonly string[],
    tolerances: Record<string, number>,
  ): Promise<Map<string, Record<string, number>>> {
    const owned = new Map(namespaces.map((ns): [string, Record<string, number>] => [ns, {}]));
    for (let i = 0; i < namespaces.length; i += STATS_BATCH) {
      const batch = namespaces.slice(i, i + STATS_BATCH);
      await Promise.all(
        shards.map(async (s) => {
          const { stats } = await this.clients
            .migration(s.url)
            .statsForBalancing({ namespaces: batch, tolerances: Object.fromEntries(batch.map((ns) => [ns, tolerances[ns]!])) });
          for (const { ns, collSize } of stats) owned.get(ns)![s.name] = collSize;
        }),
      );
    }
    return owned;
  }
}

/** The collection's max chunk size: its own, else the cluster's. */
export function maxChunkSizeBytesOf(row: CollectionRow, settings: ClusterSettings): number {
  return row.max_chunk_size_bytes !== null ? Number(row.max_chunk_size_bytes) : settings.chunkSizeBytes;
}
