import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';

/** A persisted database critical section (`database_critical_sections`). */
export interface DatabaseCriticalSectionRow {
  db: string;
  reason: string;
  blocksReads: boolean;
}

/** The rows of `database_critical_sections` (migrations/shard/1764500000000-move-primary.ts). */
@Injectable()
export class DatabaseCriticalSectionStore {
  constructor(private readonly dataSource: DataSource) {}

  async all(): Promise<DatabaseCriticalSectionRow[]> {
    const rows: Array<{ db: string; reason: string; blocks_reads: boolean }> = await this.dataSource.query(
      'SELECT db, reason, blocks_reads FROM database_critical_sections ORDER BY db',
    );
    return rows.map((r) => ({ db: r.db, reason: r.reason, blocksReads: r.blocks_reads }));
  }

  /**
   * Records the section for `reason`, or strengthens the one `reason` holds (reads stay blocked
   * once blocked). Answers the reason that holds the database afterwards: another one means the
   * row was not written.
   */
  async hold(db: string, reason: string, blockReads: boolean): Promise<string> {
    for (;;) {
      const rows: Array<{ reason: string }> = await this.dataSource.query(
        `INSERT INTO database_critical_sections (db, reason, blocks_reads) VALUES ($1, $2, $3)
         ON CONFLICT (db) DO UPDATE SET blocks_reads = database_critical_sections.blocks_reads OR EXCLUDED.blocks_reads
           WHERE database_critical_sections.reason = EXCLUDED.reason
         RETURNING reason`,
        [db, reason, blockReads],
      );
      if (rows[0] !== undefined) return rows[0].reason;
      const held: Array<{ reason: string }> = await this.dataSource.query('SELECT reason FROM database_critical_sections WHERE db = $1', [
        db,
      ]);
      // Released between the two statements: try again.
      if (held[0] !== undefined) return held[0].reason;
    }
  }

  /** Deletes the section if `reason` holds it. */
  async release(db: string, reason: string): Promise<void> {
    await this.dataSource.query('DELETE FROM database_critical_sections WHERE db = $1 AND reason = $2', [db, reason]);
  }
}
