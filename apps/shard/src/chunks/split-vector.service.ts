import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { z } from 'zod';
import { type ChunkRange, compareShardKeys, decodeKey } from '@tessera/core';
import {
  type DataSizeResult,
  type SplitVectorRequest,
  type SplitVectorResult,
  chunkRangeFromWire,
  shardKeyToWire,
  splitVectorRequestSchema,
} from '@tessera/protocol';
import { parseWith } from '@tessera/platform';
import { CollectionStorageService } from '../collections/collection-storage.service.js';
import { localTable, rangeCondition, sumRange } from './range-query.js';

/** Documents whose average size stands for a range's in `splitVectorSized`'s first measure. */
const SIZE_SAMPLE = 1_000;

/**
 * MongoDB's `splitVector` on this shard's copy of a collection: where to cut a range into pieces
 * of about half the max chunk size, for the auto-splitter and the balancer's splits; and the
 * range's edge keys, where the auto-splitter cuts a top or bottom chunk. They read the documents
 * stored in the range (orphans included, as MongoDB's do); a collection this shard does not
 * store is empty.
 */
@Injectable()
export class SplitVectorService {
  /** ANALYZEs under way, by table. */
  private readonly analyzing = new Map<string, Promise<void>>();

  constructor(
    private readonly dataSource: DataSource,
    private readonly storage: CollectionStorageService,
  ) {}

  /**
   * Split points every k-th document in shard key order, with k chosen so that each piece holds
   * about half `maxChunkSizeBytes` (at the range's average document size), as MongoDB's
   * splitVector: none when the range holds less than the max; a key equal to the range's first
   * stored key or to the previous split point is skipped, so a range whose documents all share one key cannot
   * be split (`unsplittable`, what makes a chunk jumbo).
   */
  async splitVector(input: SplitVectorRequest): Promise<SplitVectorResult> {
    return (await this.splitVectorSized(input)).result;
  }

  /**
   * `splitVector`, with the range's size as it found it (the auto-splitter keeps it). Most tests
   * find a range under the max, and summing its documents' sizes reads all of them (often the
   * whole table: Postgres scans it rather than half of it through the index). So, as MongoDB's
   * splitVector estimates from the average document size, the range is first measured
   * cheaply: the average size of its first `SIZE_SAMPLE` documents (in shard key order; hashed
   * keys make that a random sample) times its number of documents, as Postgres's statistics
   * bound it (`plannedRows`: no document is read) and, when that comes to half the max or
   * more, as a count finds it. Under the max means no split points, and that
   * estimate is its size; otherwise its exact `dataSize` decides, as before. Under a hashed key
   * every chunk fills at the same pace, so all of them are tested at about the same moment.
   * The count leaves Postgres its plan: a count through the index in key order visits the heap
   * at random until a vacuum, and a sum reads every document (docs/benchmarks.md). Answers an
   * exact size whenever the range holds no more than `SIZE_SAMPLE` documents.
   */
  async splitVectorSized(input: SplitVectorRequest): Promise<{ result: SplitVectorResult; size: DataSizeResult }> {
    const request = parseWith(splitVectorRequestSchema, input, 'splitVector request');
    const table = await localTable(this.storage, request.ns);
    const under = { splitKeys: [], unsplittable: false };
    if (table === undefined) return { result: under, size: { size: 0, numObjects: 0 } };
    const { where, params } = rangeCondition(chunkRangeFromWire(request.range));
    const [sample] = (await this.dataSource.query(
      `SELECT count(*) AS n, coalesce(sum(size), 0) AS bytes
         FROM (SELECT size FROM ${table} WHERE ${where} ORDER BY shard_key LIMIT ${SIZE_SAMPLE}) s`,
      params,
    )) as [{ n: string; bytes: string }];
    const sampled = { size: Number(sample.bytes), numObjects: Number(sample.n) };
    // A sample that took in the whole range measured it exactly.
    if (sampled.numObjects < SIZE_SAMPLE) return { result: await this.splitKeysOf(request, sampled, table, where, params), size: sampled };
    const average = sampled.size / sampled.numObjects;
    const planned = await this.plannedRows(table, where, params);
    if (planned * average < request.maxChunkSizeBytes / 2)
      return { result: under, size: { size: Math.round(planned * average), numObjects: planned } };
    // Counting alone lets Postgres read the index only, where the visibility map allows.
    const [counted] = (await this.dataSource.query(`SELECT count(*) AS n FROM ${table} WHERE ${where}`, params)) as [{ n: string }];
    const numObjects = Number(counted.n);
    const estimated = Math.round(numObjects * average);
    if (estimated < request.maxChunkSizeBytes) return { result: under, size: { size: estimated, numObjects } };
    const size = await sumRange(this.dataSource, table, where, params);
    return { result: await this.splitKeysOf(request, size, table, where, params), size };
  }

  /**
   * At most how many rows `where` selects, by Postgres's statistics: the planner's estimate
   * (ANALYZE's histogram of the shard keys, scaled to the table's current size) plus every row
   * written since that ANALYZE, which the histogram does not describe (increasing keys land past
   * its end, where the planner sees almost nothing). Autovacuum analyzes a table again once a
   * tenth of it changed. A table it has not analyzed yet (it looks once a minute) is analyzed
   * here: ANALYZE reads a sample of at most 30,000 rows whatever the table's size, where a count
   * reads the whole range. All its columns, though only the shard key's statistics are read:
   * Postgres restarts the count of rows changed since the last ANALYZE only after one of every
   * column, so an ANALYZE of the shard key alone left every row counted twice.
   */
  private async plannedRows(table: string, where: string, params: unknown[]): Promise<number> {
    const stats: unknown[] = await this.dataSource.query(
      `SELECT 1 FROM pg_stats WHERE schemaname = current_schema() AND tablename = $1 AND attname = 'shard_key'`,
      [table],
    );
    if (stats.length === 0) await this.analyze(table);
    const [explained] = (await this.dataSource.query(`EXPLAIN (FORMAT JSON) SELECT 1 FROM ${table} WHERE ${where}`, params)) as [
      { 'QUERY PLAN': Array<{ Plan: { 'Plan Rows': number } }> },
    ];
    const [changed] = (await this.dataSource.query(
      `SELECT coalesce((SELECT n_mod_since_analyze FROM pg_stat_user_tables WHERE relid = $1::regclass), 0) AS n`,
      [table],
    )) as [{ n: string }];
    return Math.round(explained['QUERY PLAN'][0]!.Plan['Plan Rows']) + Number(changed.n);
  }

  /** ANALYZE of `table`, one at a time per table (a hashed collection's chunks are all tested at once). */
  private analyze(table: string): Promise<void> {
    let running = this.analyzing.get(table);
    if (running === undefined) {
      running = this.dataSource
        .query(`ANALYZE ${table}`)
        .then(() => undefined)
        .finally(() => this.analyzing.delete(table));
      this.analyzing.set(table, running);
    }
    return running;
  }

  /** The split points of the range `where` selects in `table`, which holds `size` (see `splitVector`). */
  private async splitKeysOf(
    request: z.output<typeof splitVectorRequestSchema>,
    size: DataSizeResult,
    table: string,
    where: string,
    params: unknown[],
  ): Promise<SplitVectorResult> {
    if (size.size < request.maxChunkSizeBytes || size.numObjects < 2) return { splitKeys: [], unsplittable: false };
    const average = size.size / size.numObjects;
    const every = Math.max(1, Math.floor(request.maxChunkSizeBytes / 2 / average));
    const limit = request.maxSplitPoints ?? 8192;
    const rows: Array<{ shard_key: Buffer }> = await this.dataSource.query(
      `SELECT shard_key FROM (SELECT shard_key, row_number() OVER (ORDER BY shard_key) AS n FROM ${table} WHERE ${where}) ranked
       WHERE n = 1 OR (n - 1) % $${params.length + 1} = 0 ORDER BY shard_key`,
      [...params, every],
    );
    const splitKeys: unknown[][] = [];
    // The first row is the range's smallest stored key: a split there would leave an empty piece.
    let previous = decodeKey(rows[0]!.shard_key);
    for (const row of rows.slice(1)) {
      const key = decodeKey(row.shard_key);
      if (compareShardKeys(key, previous) <= 0) continue;
      splitKeys.push(shardKeyToWire(key));
      previous = key;
      if (splitKeys.length >= limit) break;
    }
    return { splitKeys, unsplittable: splitKeys.length === 0 };
  }

  /** The encoded shard key of the range's first or last stored document; undefined when the range is empty. */
  async edgeKey(ns: string, range: ChunkRange, edge: 'first' | 'last'): Promise<Buffer | undefined> {
    const table = await localTable(this.storage, ns);
    if (table === undefined) return undefined;
    const { where, params } = rangeCondition(range);
    const rows: Array<{ shard_key: Buffer }> = await this.dataSource.query(
      `SELECT shard_key FROM ${table} WHERE ${where} ORDER BY shard_key ${edge === 'first' ? 'ASC' : 'DESC'} LIMIT 1`,
      params,
    );
    return rows[0]?.shard_key;
  }
}
