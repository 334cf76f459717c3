import type { MigrationInterface, QueryRunner } from 'typeorm';

/** MongoDB's shardIdentity document: which cluster this shard belongs to, under which name. */
export class Identity1763900000000 implements MigrationInterface {
  name = 'Identity1763900000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE shard_identity (
        singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
        cluster_id text NOT NULL,
        shard_name text NOT NULL,
        config_url text NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now()
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE shard_identity');
  }
}
