import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { ClusterTimestamp } from '@tessera/core';
import { clusterTimeFromSql, clusterTimeToSql } from './write-time.js';

/** The `shard_clock` row and the `document_history` table (migrations/shard/1764300000000-document-history.ts). */
@Injectable()
export class ShardClockStore {
  constructor(private readonly dataSource: DataSource) {}

  /** The persisted ceiling (seconds) and the time from which versions are kept (null: not kept). */
  async load(): Promise<{ ceilingSeconds: number; historySince: ClusterTimestamp | null }> {
    const rows: Array<{ ceiling: string; history_since: string | null }> = await this.dataSource.query(
      'SELECT ceiling::text AS ceiling, history_since::text AS history_since FROM shard_clock',
    );
    const row = rows[0]!;
    return {
      ceilingSeconds: clusterTimeFromSql(row.ceiling).t,
      historySince: row.history_since === null ? null : clusterTimeFromSql(row.history_since),
    };
  }

  /** Moves the ceiling up to second `seconds` (never down). */
  async raiseCeiling(seconds: number): Promise<void> {
    await this.dataSource.query('UPDATE shard_clock SET ceiling = GREATEST(ceiling, $1::int8)', [clusterTimeToSql({ t: seconds, i: 0 })]);
  }

  /**
   * Records from when versions are kept: `since` unless already kept (an earlier start stays),
   * or null when they are not kept. Answers the time recorded.
   */
  async keepHistorySince(since: ClusterTimestamp | null): Promise<ClusterTimestamp | null> {
    const rows: Array<{ history_since: string | null }> = await this.dataSource.query(
      `WITH kept AS (
         UPDATE shard_clock SET history_since = CASE WHEN $1::int8 IS NULL THEN NULL ELSE COALESCE(history_since, $1::int8) END
         RETURNING history_since)
       SELECT history_since::text AS history_since FROM kept`,
      [since === null ? null : clusterTimeToSql(since)],
    );
    const kept = rows[0]!.history_since;
    return kept === null ? null : clusterTimeFromSql(kept);
  }

  /** Deletes up to `limit` versions that ended before `before`; answers how many. */
  async trimHistory(before: ClusterTimestamp, limit: number): Promise<number> {
    const rows: unknown[] = await this.dataSource.query(
      `WITH gone AS (
         DELETE FROM document_history WHERE ctid = ANY(ARRAY(SELECT ctid FROM document_history WHERE valid_to < $1::int8 LIMIT $2))
         RETURNING 1)
       SELECT 1 FROM gone`,
      [clusterTimeToSql(before), limit],
    );
    return rows.length;
  }
}
