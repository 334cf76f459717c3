import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Keeps a session's executed statements in its `txn_records` row instead of a row per statement:
 * `stmt_ids`, `shard_keys` and `results` are parallel arrays holding the statements of the
 * session's current txnNumber, all of them in `collection_uuid` (a txnNumber is one command).
 * A NULL result is an inserted document's, the commonest, kept small. Recording a command is
 * then one write of one row, where a row per statement cost an index entry per statement and
 * the churn of deleting the previous txnNumber's rows (docs/benchmarks.md). Results stay JSON
 * text, never jsonb: a retry answers the first attempt's documents field for field.
 *
 * `txn_expect` lets one statement check its own effects and roll them back: a write and its
 * record go in a single statement, which raises unless the session's row was as expected.
 */
export class TxnStatementsInRecords1764100000000 implements MigrationInterface {
  name = 'TxnStatementsInRecords1764100000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      ALTER TABLE txn_records
        ADD COLUMN collection_uuid uuid,
        ADD COLUMN stmt_ids integer[] NOT NULL DEFAULT '{}',
        ADD COLUMN shard_keys bytea[] NOT NULL DEFAULT '{}',
        ADD COLUMN results text[] NOT NULL DEFAULT '{}'`);
    await q.query(`
      UPDATE txn_records r SET collection_uuid = s.collection_uuid, stmt_ids = s.stmt_ids, shard_keys = s.shard_keys, results = s.results
      FROM (SELECT lsid, txn_number, (array_agg(collection_uuid))[1] AS collection_uuid,
                   array_agg(stmt_id ORDER BY stmt_id) AS stmt_ids,
                   array_agg(shard_key ORDER BY stmt_id) AS shard_keys,
                   array_agg(CASE WHEN result::text = '{"op":"insert"}' THEN NULL ELSE result::text END ORDER BY stmt_id) AS results
            FROM txn_statements GROUP BY lsid, txn_number) s
      WHERE r.lsid = s.lsid AND r.txn_number = s.txn_number`);
    await q.query('DROP TABLE txn_statements');
    await q.query(`
      CREATE FUNCTION txn_expect(ok boolean, message text) RETURNS boolean LANGUAGE plpgsql AS $$
      BEGIN
        IF ok IS NOT TRUE THEN RAISE EXCEPTION '%', message; END IF;
        RETURN true;
      END $$`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP FUNCTION txn_expect(boolean, text)');
    await q.query(`
      CREATE TABLE txn_statements (
        lsid uuid NOT NULL,
        txn_number bigint NOT NULL,
        stmt_id integer NOT NULL,
        collection_uuid uuid NOT NULL,
        shard_key bytea,
        result json NOT NULL,
        PRIMARY KEY (lsid, txn_number, stmt_id)
      )`);
    await q.query('CREATE INDEX txn_statements_chunk ON txn_statements (collection_uuid, shard_key)');
    await q.query(`
      INSERT INTO txn_statements (lsid, txn_number, stmt_id, collection_uuid, shard_key, result)
      SELECT r.lsid, r.txn_number, u.stmt_id, r.collection_uuid, u.shard_key, coalesce(u.result, '{"op":"insert"}')::json
      FROM txn_records r, unnest(r.stmt_ids, r.shard_keys, r.results) AS u(stmt_id, shard_key, result)`);
    await q.query('ALTER TABLE txn_records DROP COLUMN collection_uuid, DROP COLUMN stmt_ids, DROP COLUMN shard_keys, DROP COLUMN results');
  }
}
