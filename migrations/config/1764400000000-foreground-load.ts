import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `foreground_load`: each router's last report of its foreground writes (how many over its
 * window, their p99, and how many were still running at its end), which the balancer's leader
 * reads to pace migrations. One row per
 * router, overwritten by each report; `window_end` is the config database's time of the report.
 */
export class ForegroundLoad1764400000000 implements MigrationInterface {
  name = 'ForegroundLoad1764400000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE foreground_load (
      router_id text PRIMARY KEY,
      window_end timestamptz NOT NULL,
      window_ms integer NOT NULL,
      writes integer NOT NULL,
      p99_ms double precision,
      in_flight integer NOT NULL
    )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE foreground_load');
  }
}
