import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { type ChunkRange, type CollectionVersion, type SizedChunk, type ZoneRange, decodeKey } from '@tessera/core';
import { findCollection, readCollectionVersion } from '../catalog/catalog-read.service.js';
import { type ChunkRow, type CollectionRow, chunkFromRow, generationOfRow } from '../catalog/catalog-rows.js';

/** A shard as the balancer reads it from the registry. */
export interface ShardRow {
  name: string;
  url: string;
  state: 'active' | 'draining';
  zones: string[];
}

/**
 * The catalog as the balancer reads it: the shard registry, the sharded collections, their
 * chunks with the sizes known for them, their zone ranges and the ranges being migrated. Every
 * query of the balancer's loops lives here; the services orchestrate.
 */
@Injectable()
export class BalancerCatalogStore {
  constructor(private readonly dataSource: DataSource) {}

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

  /** Collections with `defragmentCollection` on. */
  async defragmentingCollections(): Promise<CollectionRow[]> {
    return this.dataSource.query('SELECT * FROM collections WHERE defragment_collection ORDER BY ns');
  }

  /** The collection `ns`; `NAMESPACE_NOT_FOUND` when it is not sharded. */
  async collection(ns: string): Promise<CollectionRow> {
    return findCollection(this.dataSource.manager, ns);
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

  /** Ranges of `row` being migrated now, with their migration's id. */
  async migratingRanges(row: CollectionRow): Promise<Array<{ id: string; range: ChunkRange }>> {
    const rows: Array<{ id: string; min: Buffer; max: Buffer }> = await this.dataSource.query(
      'SELECT id, min, max FROM active_migrations WHERE collection_uuid = $1',
      [row.uuid],
    );
    return rows.map((r) => ({ id: r.id, range: { min: decodeKey(r.min), max: decodeKey(r.max) } }));
  }

  /** The collection version now (the highest of its chunks). */
  async collectionVersion(row: CollectionRow): Promise<CollectionVersion> {
    return readCollectionVersion(this.dataSource.manager, row.uuid, generationOfRow(row));
  }
}
