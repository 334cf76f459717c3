import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The first tables of the config database, named after MongoDB's config collections:
 * `version` holds the cluster id, `shards` the shard registry, `mongos` the routers' pings.
 */
export class Registry1763900000000 implements MigrationInterface {
  name = 'Registry1763900000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE version (
        singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
        cluster_id uuid NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`
      CREATE TABLE shards (
        name text PRIMARY KEY,
        url text NOT NULL UNIQUE,
        state text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'draining')),
        zones text[] NOT NULL DEFAULT '{}',
        added_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`
      CREATE TABLE mongos (
        id text PRIMARY KEY,
        url text NOT NULL,
        version text NOT NULL,
        started_at timestamptz NOT NULL,
        last_ping_at timestamptz NOT NULL
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE mongos');
    await q.query('DROP TABLE shards');
    await q.query('DROP TABLE version');
  }
}
