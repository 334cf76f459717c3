import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What a shard persists about chunk migrations (MongoDB's config.migrationCoordinators,
 * config.migrationRecipients, config.rangeDeletions and the ActiveMigrationsRegistry), so that
 * a restart finishes or undoes every migration it took part in:
 *
 * - `migration_registry`: at most one row, the migration this shard donates or receives; a
 *   shard takes part in one migration at a time.
 * - `migration_coordinators`: the donor's record of a migration and, once known, its decision.
 * - `migration_recipients`: the recipient's record of a migration it is receiving.
 * - `range_deletions`: ranges whose documents this shard must delete; `pending` until the
 *   migration's decision says this side lost them.
 * - `migration_mods`: ids of documents written in a range being donated, captured by a trigger
 *   on the collection's table for the migration's lifetime (MongoDB's cloner tracks them from
 *   the op observer), read and emptied by the recipient's catch-up.
 */
export class Migrations1763900300000 implements MigrationInterface {
  name = 'Migrations1763900300000';

  // Long: every migration table in one schema change, one statement per table.
  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE migration_registry (
        slot smallint PRIMARY KEY DEFAULT 1 CHECK (slot = 1),
        migration_id uuid NOT NULL,
        role text NOT NULL CHECK (role IN ('donor', 'recipient')),
        ns text NOT NULL,
        min_ejson text NOT NULL,
        max_ejson text NOT NULL,
        other_shard text NOT NULL,
        registered_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`
      CREATE TABLE migration_coordinators (
        id uuid PRIMARY KEY,
        ns text NOT NULL,
        collection_uuid uuid NOT NULL,
        min bytea NOT NULL,
        max bytea NOT NULL,
        min_ejson text NOT NULL,
        max_ejson text NOT NULL,
        recipient text NOT NULL,
        recipient_url text NOT NULL,
        pre_migration_version json NOT NULL,
        decision text CHECK (decision IN ('committed', 'aborted')),
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`
      CREATE TABLE migration_recipients (
        id uuid PRIMARY KEY,
        ns text NOT NULL,
        collection_uuid uuid NOT NULL,
        min bytea NOT NULL,
        max bytea NOT NULL,
        donor text NOT NULL,
        donor_url text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`
      CREATE TABLE range_deletions (
        id uuid PRIMARY KEY,
        ns text NOT NULL,
        collection_uuid uuid NOT NULL,
        min bytea NOT NULL,
        max bytea NOT NULL,
        min_ejson text NOT NULL,
        max_ejson text NOT NULL,
        pending boolean NOT NULL,
        when_to_clean timestamptz,
        deleted_documents bigint NOT NULL DEFAULT 0,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`
      CREATE TABLE migration_mods (
        seq bigserial PRIMARY KEY,
        migration_id uuid NOT NULL,
        id bytea NOT NULL
      )`);
    await q.query('CREATE INDEX migration_mods_migration ON migration_mods (migration_id, seq)');
    // TG_ARGV: migration id, range min and max (hex of the encoded shard keys).
    await q.query(`
      CREATE FUNCTION tessera_capture_migration_mod() RETURNS trigger LANGUAGE plpgsql AS $$
      DECLARE
        lo bytea := decode(TG_ARGV[1], 'hex');
        hi bytea := decode(TG_ARGV[2], 'hex');
      BEGIN
        IF TG_OP = 'DELETE' THEN
          IF OLD.shard_key >= lo AND OLD.shard_key < hi THEN
            INSERT INTO migration_mods (migration_id, id) VALUES (TG_ARGV[0]::uuid, OLD.id);
          END IF;
        ELSIF (NEW.shard_key >= lo AND NEW.shard_key < hi)
           OR (TG_OP = 'UPDATE' AND OLD.shard_key >= lo AND OLD.shard_key < hi) THEN
          INSERT INTO migration_mods (migration_id, id) VALUES (TG_ARGV[0]::uuid, NEW.id);
        END IF;
        RETURN NULL;
      END $$`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP FUNCTION tessera_capture_migration_mod()');
    await q.query('DROP TABLE migration_mods, range_deletions, migration_recipients, migration_coordinators, migration_registry');
  }
}
