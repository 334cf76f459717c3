import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `database_critical_sections`: MongoDB's persisted database critical section
 * (config.collection_critical_sections for a database), which movePrimary takes on the old
 * primary while it clones the database's unsharded collections to the new one. It is persisted
 * so that a shard restarted mid-move keeps blocking writes (and reads, once `blocks_reads`):
 * the clone must see every acknowledged write, and none may land on the old primary after the
 * move commits. `reason` is the coordinator's id; only that coordinator releases it.
 *
 * `collections.history_since`: the ClusterTime from which a collection's rows and kept versions
 * are complete here, for a collection cloned by movePrimary (null: since its creation). The
 * clone brings the current documents only, so a snapshot read at an earlier time is answered
 * SnapshotUnavailable instead of finding nothing.
 */
export class MovePrimary1764500000000 implements MigrationInterface {
  name = 'MovePrimary1764500000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE database_critical_sections (
        db text PRIMARY KEY,
        reason text NOT NULL,
        blocks_reads boolean NOT NULL DEFAULT false,
        entered_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query('ALTER TABLE collections ADD COLUMN history_since int8');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE collections DROP COLUMN history_since');
    await q.query('DROP TABLE database_critical_sections');
  }
}
