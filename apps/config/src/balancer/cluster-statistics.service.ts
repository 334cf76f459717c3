import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { type CollectionDistribution, type ShardStatistics, type SizedChunk, type ZoneRange, decodeKey } from '@tessera/core';
import type { ClusterSettings } from '@tessera/protocol';
import { InternalClients } from '@tessera/platform';
import { type ChunkRow, type CollectionRow, chunkFromRow, generationOfRow } from '../catalog/catalog-rows.js';

/**
 * A shard may estimate its bytes of a collection with a standard error of this fraction of the
 * collection's max chunk size (a tenth): the balancer moves chunks when two shards differ by 3
 * chunks, some 20 standard errors of their difference, so sampling never tips a decision.
 */
const SIZE_TOLERANCE_CHUNKS = 10;
/** Namespaces per `statsForBalancing` request (the request's own bound). */
const STATS_BATCH = 10_000;

/** A shard as the balancer reads it from the registry. */
export interface ShardRow {
  name: string;
  url: string;
  state: 'active' | 'draining';
  zones: string[];
}

/**
 * What the balancer's policies read (MongoDB's ClusterStatistics and
 * CollectionDataSizeInfoForBalancing): the shards, each collection's chunks and zones from the
 * catalog, its max chunk size, and each shard's bytes of it from the shards' `statsForBalancing`.
 */
@Injectable()
export class ClusterStatisticsService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly clients: InternalClients,
  ) {}

  async shards(): Promise<ShardRow[]> {
    return this.dataSource.query('SELECT name, url, state, zones FROM shards ORDER BY name');
  }

  /** Collections the balancer looks at: balancing enabled, or being defragmented. */
  async balancedCollections(): Promise<CollectionRow[]> {
    return this.dataSource.query('SELECT * FROM collections WHERE balancing_enabled OR defragment_collection ORDER BY ns');
  }

  /** Every sharded collection (the auto-merger looks at collections with balancing off too). */
  async allCollections(): Promise<CollectionRow[]> {
    return this.dataSource.query('SELECT * FROM collections ORDER BY ns');
  }

  async chunks(row: CollectionRow): Promise<SizedChunk[]> {
    const generation = generationOfRow(row);
    const chunkRows: ChunkRow[] = await this.dataSource.query('SELECT * FROM chunks WHERE collection_uuid = $1', [row.uuid]);
    return chunkRows.map((c) => ({
      ...chunkFromRow(c, generation),
      ...(c.estimated_size_bytes !== null ? { estimatedSizeBytes: Number(c.estimated_size_bytes) } : {}),
    }));
  }

  /** The collection's zone ranges (`config.tags`). */
  async zones(ns: string): Promise<ZoneRange[]> {
    const rows: Array<{ min: Buffer; max: Buffer; tag: string }> = await this.dataSource.query(
      'SELECT min, max, tag FROM tags WHERE ns = $1',
      [ns],
    );
    return rows.map((t) => ({ range: { min: decodeKey(t.min), max: decodeKey(t.max) }, zone: t.tag }));
  }

  maxChunkSizeBytes(row: CollectionRow, settings: ClusterSettings): number {
    return row.max_chunk_size_bytes !== null ? Number(row.max_chunk_size_bytes) : settings.chunkSizeBytes;
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
      Object.fromEntries(rows.map((r) => [r.ns, Math.floor(this.maxChunkSizeBytes(r, settings) / SIZE_TOLERANCE_CHUNKS)])),
    );
    return Promise.all(
      rows.map(async (row) => ({
        namespace: row.ns,
        chunks: await this.chunks(row),
        zones: await this.zones(row.ns),
        maxChunkSizeBytes: this.maxChunkSizeBytes(row, settings),
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

export function statisticsOf(row: ShardRow): ShardStatistics {
  return { id: row.name, state: row.state, zones: row.zones };
}
