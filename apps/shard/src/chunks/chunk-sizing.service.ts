import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import {
  type DataSizeRequest,
  type DataSizeResult,
  type StatsForBalancingRequest,
  type StatsForBalancingResult,
  chunkRangeFromWire,
  dataSizeRequestSchema,
  statsForBalancingRequestSchema,
} from '@tessera/protocol';
import { parseWith } from '@tessera/platform';
import { CollectionStorageService, tableName } from '../collections/collection-storage.service.js';
import { localTable, rangeCondition, sumRange } from './range-query.js';

/**
 * statsForBalancing reads at least this many pages (8 MiB) of a table it samples. The balancer
 * asks every round, and an exact sum reads the whole table: work that grows with the data and
 * competes with the writes (docs/benchmarks.md).
 */
const MIN_SAMPLED_PAGES = 1_024;

/**
 * MongoDB's `dataSize` and the balancer's `statsForBalancing` on this shard's copy of a
 * collection: what the balancer and migrations size ranges and collections with (`splitVector`
 * is `SplitVectorService`'s). `dataSize` reads the documents stored in the range (orphans
 * included, as MongoDB's does); a collection this shard does not store is empty.
 * `statsForBalancing` leaves the orphans out.
 */
@Injectable()
export class ChunkSizingService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly storage: CollectionStorageService,
  ) {}

  async dataSize(input: DataSizeRequest): Promise<DataSizeResult> {
    const request = parseWith(dataSizeRequestSchema, input, 'dataSize request');
    const table = await localTable(this.storage, request.ns);
    if (table === undefined) return { size: 0, numObjects: 0 };
    const { where, params } = rangeCondition(request.range && chunkRangeFromWire(request.range));
    return sumRange(this.dataSource, table, where, params);
  }

  /**
   * The bytes of each collection this shard owns (estimated from a sample of a large table when
   * the request allows an error, see `sampleFraction`): what it stores outside the ranges of its
   * range deletion tasks that hold orphans, which are the ready ones (a range given away, or a
   * received copy of an aborted migration) and the pending ones of ranges it is receiving (MongoDB
   * subtracts its `numOrphanDocs` the same way). A donor's pending task covers a range it still
   * owns until its migration commits, so that range counts. Without this, a donor would weigh
   * as much as before its migrations until their ranges are cleaned, and the balancer would move
   * more than needed.
   */
  async statsForBalancing(input: StatsForBalancingRequest): Promise<StatsForBalancingResult> {
    const request = parseWith(statsForBalancingRequestSchema, input, 'statsForBalancing request');
    const stats = await Promise.all(
      request.namespaces.map(async (ns) => {
        const local = await this.storage.localCollection(ns);
        if (local === undefined) return { ns, collSize: 0 };
        const table = tableName(local.uuid);
        const fraction = await this.sampleFraction(table, request.tolerances?.[ns]);
        const rows: Array<{ bytes: string }> = await this.dataSource.query(
          `SELECT coalesce(sum(size), 0) AS bytes FROM ${table} d ${fraction < 1 ? `TABLESAMPLE SYSTEM (${100 * fraction})` : ''}
            WHERE NOT EXISTS (SELECT 1 FROM range_deletions r
                               WHERE r.collection_uuid = $1 AND d.shard_key >= r.min AND d.shard_key < r.max
                                 AND (NOT r.pending OR EXISTS (SELECT 1 FROM migration_recipients m WHERE m.id = r.id)))`,
          [local.uuid],
        );
        return { ns, collSize: Math.round(Number(rows[0]!.bytes) / fraction) };
      }),
    );
    return { stats };
  }

  /**
   * The fraction of `table`'s pages to read for a sum whose standard error stays within
   * `tolerance` bytes: 1 (every page) without a tolerance, for a table of fewer than
   * `MIN_SAMPLED_PAGES` pages, or when the sample would be half the table anyway. Postgres's
   * `TABLESAMPLE SYSTEM` takes whole pages at random; scaling the sampled sum by the fraction
   * estimates the whole with a standard error of about T·sqrt((1 − f)/(f·N)) for a table of N
   * evenly filled pages holding T bytes (taken here as full pages, and the tolerance halved for
   * unevenly filled ones).
   */
  private async sampleFraction(table: string, tolerance: number | undefined): Promise<number> {
    if (tolerance === undefined || tolerance <= 0) return 1;
    const [relation] = (await this.dataSource.query(
      `SELECT pg_relation_size($1::regclass) AS bytes, current_setting('block_size')::int AS block`,
      [table],
    )) as [{ bytes: string; block: number }];
    const bytes = Number(relation.bytes);
    const pages = bytes / relation.block;
    if (pages < MIN_SAMPLED_PAGES) return 1;
    const allowed = tolerance / 2;
    const fraction = Math.max(MIN_SAMPLED_PAGES / pages, 1 / (1 + (pages * allowed * allowed) / (bytes * bytes)));
    return fraction >= 0.5 ? 1 : fraction;
  }
}
