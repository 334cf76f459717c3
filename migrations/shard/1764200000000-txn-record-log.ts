import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `txn_record_log`: where a retryable write records its statements, one row per command in the
 * write's own statement, whatever the number of sessions the command carries. A row is only ever
 * inserted, then folded into `txn_records` (and deleted) by the shard's periodic fold, before a
 * session is loaded, and before migrations or the reaper read or change `txn_records`. Updating
 * each session's `txn_records` row in every write cost about as much as the write itself
 * (docs/benchmarks.md); an insert into an unindexed table costs little. `parts` is JSON text of
 * the command's session parts, parsed only by the fold. The table has no index: the fold reads
 * it whole, and nothing else reads it.
 */
export class TxnRecordLog1764200000000 implements MigrationInterface {
  name = 'TxnRecordLog1764200000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE txn_record_log (
        collection_uuid uuid NOT NULL,
        parts text NOT NULL,
        written_at timestamptz NOT NULL DEFAULT now()
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE txn_record_log');
  }
}
