import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Active migrations (MongoDB's config.migrations; TypeORM's own table already has that name): one row per chunk being moved, written when a
 * migration is started and removed when it ends, so a new leader sees what was in flight and a
 * chunk is never the subject of two migrations. Filled by the migration issue's moveRange.
 */
export class ActiveMigrations1763900200000 implements MigrationInterface {
  name = 'ActiveMigrations1763900200000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE active_migrations (
        id uuid PRIMARY KEY,
        ns text NOT NULL,
        collection_uuid uuid NOT NULL REFERENCES collections (uuid) ON DELETE CASCADE,
        min bytea NOT NULL,
        max bytea NOT NULL,
        min_ejson text NOT NULL,
        max_ejson text NOT NULL,
        donor text NOT NULL REFERENCES shards (name),
        recipient text NOT NULL REFERENCES shards (name),
        force_jumbo boolean NOT NULL DEFAULT false,
        wait_for_delete boolean NOT NULL DEFAULT false,
        started_at timestamptz NOT NULL DEFAULT now(),
        CHECK (donor <> recipient)
      )`);
    await q.query('CREATE UNIQUE INDEX active_migrations_collection_min ON active_migrations (collection_uuid, min)');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE active_migrations');
  }
}
