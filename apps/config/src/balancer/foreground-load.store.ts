import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { type ForegroundLoadReport, foregroundLoadReportSchema } from '@tessera/protocol';
import { parseWith } from '@tessera/platform';

/** A router's report as the leader reads it: its window's age by the config database's clock. */
export interface StoredLoadReport {
  readonly routerId: string;
  /** The report's `window_end` at the database's precision, to read only newer ones next time. */
  readonly windowEnd: string;
  /** How long ago the window ended, by the database's clock. */
  readonly ageMs: number;
  readonly windowMs: number;
  readonly writes: number;
  readonly p99Ms: number | null;
  readonly inFlight: number;
}

/**
 * The routers' foreground load reports (`foreground_load`, one row per router): any config
 * process stores them, the balancer's leader reads the new ones. Times are the database's, so
 * the processes' clocks need not agree.
 */
@Injectable()
export class ForegroundLoadStore {
  constructor(private readonly dataSource: DataSource) {}

  async save(input: ForegroundLoadReport): Promise<void> {
    const report = parseWith(foregroundLoadReportSchema, input, 'foreground load report');
    await this.dataSource.query(
      `INSERT INTO foreground_load (router_id, window_end, window_ms, writes, p99_ms, in_flight)
       VALUES ($1, clock_timestamp(), $2, $3, $4, $5)
       ON CONFLICT (router_id) DO UPDATE SET window_end = EXCLUDED.window_end, window_ms = EXCLUDED.window_ms,
         writes = EXCLUDED.writes, p99_ms = EXCLUDED.p99_ms, in_flight = EXCLUDED.in_flight`,
      [report.router, report.windowMs, report.writes, report.p99Ms, report.inFlight],
    );
  }

  /** The reports of windows that ended after `since` (all of them with null). */
  async since(since: string | null): Promise<StoredLoadReport[]> {
    const rows: Array<{
      router_id: string;
      window_end: string;
      age_ms: number;
      window_ms: number;
      writes: number;
      p99_ms: number | null;
      in_flight: number;
    }> = await this.dataSource.query(
      `SELECT router_id, window_end::text AS window_end, extract(epoch FROM clock_timestamp() - window_end) * 1000 AS age_ms,
                window_ms, writes, p99_ms, in_flight
           FROM foreground_load WHERE $1::timestamptz IS NULL OR window_end > $1 ORDER BY window_end`,
      [since],
    );
    return rows.map((r) => ({
      routerId: r.router_id,
      windowEnd: r.window_end,
      ageMs: Number(r.age_ms),
      windowMs: r.window_ms,
      writes: r.writes,
      p99Ms: r.p99_ms === null ? null : Number(r.p99_ms),
      inFlight: r.in_flight,
    }));
  }
}
