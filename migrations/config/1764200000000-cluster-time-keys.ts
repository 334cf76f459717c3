import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `cluster_time_keys`: MongoDB's admin.system.keys, the HMAC keys that sign the ClusterTime
 * gossiped to clients (sharding-internals.md, "Key management"). The config leader generates
 * them ahead of need; they are never updated, and a key past its overlap is never used again.
 */
export class ClusterTimeKeys1764200000000 implements MigrationInterface {
  name = 'ClusterTimeKeys1764200000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE cluster_time_keys (
        key_id bigint PRIMARY KEY,
        purpose text NOT NULL DEFAULT 'HMAC',
        key bytea NOT NULL,
        expires_at timestamptz NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE cluster_time_keys');
  }
}
