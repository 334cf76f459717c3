import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The shard's local catalog: the sharded and unsharded collections it stores, each in a table
 * of its own (`c_<uuid>`) with the encoded `_id`, the encoded shard key (btree), the document
 * as Extended JSON in a `json` column (jsonb would reorder its fields), and its size.
 */
export class Collections1763900100000 implements MigrationInterface {
  name = 'Collections1763900100000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE collections (
        uuid uuid PRIMARY KEY,
        ns text NOT NULL UNIQUE,
        db text NOT NULL,
        key_pattern json NOT NULL,
        is_unique boolean NOT NULL DEFAULT false,
        table_name text NOT NULL UNIQUE,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query('CREATE INDEX collections_db ON collections (db)');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE collections');
  }
}
