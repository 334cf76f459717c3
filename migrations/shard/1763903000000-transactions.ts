import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What a shard persists about retryable writes (sharding-internals.md, "Retryable writes"):
 *
 * - `txn_records`: MongoDB's config.transactions, one row per session, naming the session's
 *   latest txnNumber. Its row lock serializes the writes of one session across connections.
 * - `txn_statements`: the statements executed under the session's current txnNumber with their
 *   results, our stand-in for the oplog chain a retry is answered from. Only the current
 *   txnNumber's statements are kept. `collection_uuid` and `shard_key` name the document
 *   written, so that a chunk migration can move the history of the chunk's documents.
 * - `txn_images`: MongoDB's config.image_collection, the pre- or post-image a retried
 *   findAndModify answers with; one per session, like the side collection.
 *
 * Results and images are `json`, not `jsonb`: jsonb reorders an object's fields, and a retry
 * must answer the documents exactly as the first attempt did.
 */
export class Transactions1763903000000 implements MigrationInterface {
  name = 'Transactions1763903000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE txn_records (
        lsid uuid PRIMARY KEY,
        txn_number bigint NOT NULL,
        last_write_at timestamptz NOT NULL
      )`);
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
      CREATE TABLE txn_images (
        lsid uuid PRIMARY KEY,
        txn_number bigint NOT NULL,
        image_kind text NOT NULL CHECK (image_kind IN ('preImage', 'postImage')),
        image json NOT NULL
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE txn_images');
    await q.query('DROP TABLE txn_statements');
    await q.query('DROP TABLE txn_records');
  }
}
