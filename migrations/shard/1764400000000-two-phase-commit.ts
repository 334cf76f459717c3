import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What a shard keeps for cross-shard transactions (sharding-internals.md, "Two-phase Commit
 * Protocol"):
 *
 * - `txn_records` gains `txn_state` and `commit_time`: a participant writes `committed` with the
 *   commit's ClusterTime inside its prepared transaction, so the record becomes true exactly when
 *   COMMIT PREPARED does. A retried commit finds it there after the prepared transaction is gone.
 * - `transaction_coordinators`: MongoDB's config.transaction_coordinators, the coordinator's
 *   decision and participant list, written before any participant is told to commit and deleted
 *   once every participant has acknowledged the decision.
 *
 * The history trigger no longer keeps a version its own transaction wrote: a transaction's
 * intermediate versions were never visible to anyone else, and its end time is only known at
 * commit, when the transaction restamps what it wrote (`xmin` names the writing transaction).
 */
export class TwoPhaseCommit1764400000000 implements MigrationInterface {
  name = 'TwoPhaseCommit1764400000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE txn_records ADD COLUMN txn_state text, ADD COLUMN commit_time int8');
    await q.query(`
      CREATE TABLE transaction_coordinators (
        lsid uuid NOT NULL,
        txn_number bigint NOT NULL,
        participants text[] NOT NULL,
        decision text NOT NULL CHECK (decision IN ('commit', 'abort')),
        commit_time int8,
        decided_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (lsid, txn_number)
      )`);
    await q.query(`
      CREATE OR REPLACE FUNCTION keep_document_history() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF current_setting('tessera.keep_history') = 'off' OR OLD.xmin = pg_current_xact_id()::xid THEN
          RETURN NULL;
        END IF;
        INSERT INTO document_history (collection_uuid, id, shard_key, doc, size, valid_from, valid_to)
        VALUES (TG_ARGV[0]::uuid, OLD.id, OLD.shard_key, OLD.doc, OLD.size, OLD.valid_from, current_setting('tessera.write_time')::int8);
        RETURN NULL;
      END $$`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE OR REPLACE FUNCTION keep_document_history() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF current_setting('tessera.keep_history') = 'off' THEN
          RETURN NULL;
        END IF;
        INSERT INTO document_history (collection_uuid, id, shard_key, doc, size, valid_from, valid_to)
        VALUES (TG_ARGV[0]::uuid, OLD.id, OLD.shard_key, OLD.doc, OLD.size, OLD.valid_from, current_setting('tessera.write_time')::int8);
        RETURN NULL;
      END $$`);
    await q.query('DROP TABLE transaction_coordinators');
    await q.query('ALTER TABLE txn_records DROP COLUMN txn_state, DROP COLUMN commit_time');
  }
}
