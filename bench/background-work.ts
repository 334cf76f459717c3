import pg from 'pg';

/**
 * What ran besides the load during a measured run: Postgres checkpoints and the cluster's
 * changelog entries (splits, migrations, range deletions), balancer rounds left out.
 *
 * Checkpoints matter most. After one, the first change to each page writes the whole page to
 * the WAL, and a hashed key's index inserts land on pages all over the index, so the seconds
 * after a checkpoint are the slowest of a write load: which run a timed checkpoint falls in can
 * decide a ratio (docs/benchmarks.md). So bench:crud measures each insert run from a checkpoint
 * of its own (`checkpoint`), and prints any other.
 */
export class BackgroundWork {
  private constructor(
    private readonly postgres: pg.Client,
    private readonly config: pg.Client,
    private readonly checkpointsQuery: string,
  ) {}

  static async open(postgresUrl: string, configUrl: string): Promise<BackgroundWork> {
    const postgres = new pg.Client({ connectionString: postgresUrl });
    const config = new pg.Client({ connectionString: configUrl });
    await postgres.connect();
    await config.connect();
    const { rows } = await postgres.query<{ version: number }>("SELECT current_setting('server_version_num')::int AS version");
    // Postgres 17 moved the checkpoint counters from pg_stat_bgwriter to pg_stat_checkpointer.
    const checkpointsQuery =
      rows[0]!.version >= 170000
        ? 'SELECT num_timed + num_requested AS n FROM pg_stat_checkpointer'
        : 'SELECT checkpoints_timed + checkpoints_req AS n FROM pg_stat_bgwriter';
    return new BackgroundWork(postgres, config, checkpointsQuery);
  }

  async snapshot(): Promise<{ checkpoints: number; changelogId: number }> {
    const [{ rows: checkpoints }, { rows: changelog }] = await Promise.all([
      this.postgres.query<{ n: string }>(this.checkpointsQuery),
      this.config.query<{ id: string | null }>('SELECT max(id) AS id FROM changelog'),
    ]);
    return { checkpoints: Number(checkpoints[0]!.n), changelogId: Number(changelog[0]!.id ?? 0) };
  }

  /** Says what ran since `before`, e.g. "1 checkpoint; split x2, moveChunk.commit x1", or "none". */
  async since(before: { checkpoints: number; changelogId: number }): Promise<string> {
    const after = await this.snapshot();
    const { rows } = await this.config.query<{ what: string; n: string }>(
      `SELECT what, count(*) AS n FROM changelog WHERE id > $1 AND id <= $2 AND what <> 'balancer.round' GROUP BY what ORDER BY min(id)`,
      [before.changelogId, after.changelogId],
    );
    const checkpoints = after.checkpoints - before.checkpoints;
    const parts = [
      ...(checkpoints > 0 ? [`${checkpoints} checkpoint${checkpoints === 1 ? '' : 's'}`] : []),
      ...(rows.length > 0 ? [rows.map((r) => `${r.what} x${r.n}`).join(', ')] : []),
    ];
    return parts.length === 0 ? 'none' : parts.join('; ');
  }

  /** Has Postgres take a checkpoint now; answers when it is done. */
  async checkpoint(): Promise<void> {
    await this.postgres.query('CHECKPOINT');
  }

  async close(): Promise<void> {
    await Promise.all([this.postgres.end(), this.config.end()]);
  }
}
