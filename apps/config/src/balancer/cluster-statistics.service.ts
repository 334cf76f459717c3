import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import type { CollectionDistribution } from '@tessera/core';
import type { ClusterSettings } from '@tessera/protocol';
import { InternalClients, LOGGER, SETTINGS } from '@tessera/platform';
import type { ConfigSettings } from '../config.settings.js';
import { type CollectionRow, generationOfRow, keyPatternOfRow } from '../catalog/catalog-rows.js';
import { type Snapshot, errorEntry } from './balancer-round.js';
import { BalancerCatalogStore, type ShardRow } from './balancer-catalog.store.js';

/** Namespaces per `statsForBalancing` request (the request's own bound). */
const STATS_BATCH = 10_000;

/** Each shard's bytes of one collection as last read, and when; keyed by namespace. */
interface OwnedRead {
  /** The collection's uuid: a collection dropped and created again is read afresh. */
  readonly uuid: string;
  readonly readAtMs: number;
  readonly bytes: Record<string, number>;
}

/**
 * What the balancer's policies read (MongoDB's ClusterStatistics and
 * CollectionDataSizeInfoForBalancing): the shards, each collection's chunks and zones from the
 * catalog (`BalancerCatalogStore`), its max chunk size, and each shard's bytes of it from the
 * shards' `statsForBalancing`.
 *
 * A round's snapshot reads a collection's bytes from its shards at most once every
 * `TESSERA_BALANCER_STATS_REFRESH_MS`; in between it uses the last read, moved by the balancer's
 * own migrations since (`noteMigration`: the bytes each cloned leave its donor for its
 * recipient). So under the continuous scheduler, which plans after every migration, a snapshot
 * costs the catalog's rows and not the shards' scans. Foreground writes and migrations the
 * balancer did not issue show at the next read.
 */
@Injectable()
export class ClusterStatisticsService {
  private readonly owned = new Map<string, OwnedRead>();

  constructor(
    private readonly catalog: BalancerCatalogStore,
    private readonly clients: InternalClients,
    @Inject(LOGGER) private readonly logger: Logger,
    @Inject(SETTINGS) private readonly settings: Pick<ConfigSettings, 'TESSERA_BALANCER_STATS_REFRESH_MS'>,
  ) {}

  /** A balancer migration of `ns` committed, having cloned `bytes` from `from` to `to`. */
  noteMigration(ns: string, from: string, to: string, bytes: number): void {
    const read = this.owned.get(ns);
    if (read === undefined) return;
    const moved = Math.min(bytes, read.bytes[from] ?? 0);
    this.owned.set(ns, { ...read, bytes: { ...read.bytes, [from]: (read.bytes[from] ?? 0) - moved, [to]: (read.bytes[to] ?? 0) + moved } });
  }

  /**
   * A round's snapshot: the shards, and each collection the balancer looks at with its
   * distribution. A shard that does not answer its statsForBalancing leaves every collection out
   * of the round, each with the error.
   */
  async roundSnapshot(settings: ClusterSettings): Promise<Snapshot> {
    const shards = await this.catalog.shards();
    const rows = await this.catalog.balancedCollections();
    try {
      const distributions = await this.distributions(rows, settings, shards, () => ({}), this.settings.TESSERA_BALANCER_STATS_REFRESH_MS);
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
   * one `statsForBalancing` per shard for the collections not read within `maxAgeMs` (0: all of
   * them; the others from the last read, see the class comment). Throws when a shard does not answer.
   */
  async distributions(
    rows: readonly CollectionRow[],
    settings: ClusterSettings,
    shards: readonly ShardRow[],
    extra: (row: CollectionRow) => Pick<CollectionDistribution, 'chunkCountBalancingInProgress'> = () => ({}),
    maxAgeMs = 0,
  ): Promise<CollectionDistribution[]> {
    const now = Date.now();
    const stale = rows.filter((r) => !this.isFresh(r, shards, now - maxAgeMs));
    const read = await this.ownedBytes(
      shards,
      stale.map((r) => r.ns),
    );
    for (const r of stale) this.owned.set(r.ns, { uuid: r.uuid, readAtMs: now, bytes: read.get(r.ns)! });
    const owned = new Map(rows.map((r) => [r.ns, { ...this.owned.get(r.ns)!.bytes }]));
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

  /** Whether the last read of `row` is of this collection, covers exactly `shards`, and was made after `sinceMs`. */
  private isFresh(row: CollectionRow, shards: readonly ShardRow[], sinceMs: number): boolean {
    const read = this.owned.get(row.ns);
    if (read === undefined || read.uuid !== row.uuid || read.readAtMs <= sinceMs) return false;
    const names = Object.keys(read.bytes);
    return names.length === shards.length && shards.every((s) => s.name in read.bytes);
  }

  /**
   * The bytes each shard owns of each of `namespaces` (ns → shard → bytes), by the shards'
   * `statsForBalancing`: orphans waiting to be cleaned do not count (MongoDB's numOrphanDocs do
   * not). One request per shard for up to STATS_BATCH namespaces.
   */
  private async ownedBytes(shards: readonly ShardRow[], namespaces: readonly string[]): Promise<Map<string, Record<string, number>>> {
    const owned = new Map(namespaces.map((ns): [string, Record<string, number>] => [ns, {}]));
    for (let i = 0; i < namespaces.length; i += STATS_BATCH) {
      const batch = namespaces.slice(i, i + STATS_BATCH);
      await Promise.all(
        shards.map(async (s) => {
          const { stats } = await this.clients.migration(s.url).statsForBalancing({ namespaces: batch });
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
