import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `migration_registry` holds one row per migration instead of at most one: a shard may donate
 * several migrations at once (each of its own range, to its own recipient), and still receives
 * one at a time and never donates and receives together. `MigrationRegistryStore.register`
 * keeps those rules under a lock on the table.
 */
export class ParallelDonations1764600000000 implements MigrationInterface {
  name = 'ParallelDonations1764600000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE migration_registry DROP COLUMN slot');
    await q.query('ALTER TABLE migration_registry ADD PRIMARY KEY (migration_id)');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE migration_registry DROP CONSTRAINT migration_registry_pkey');
    await q.query('ALTER TABLE migration_registry ADD COLUMN slot smallint NOT NULL DEFAULT 1 CHECK (slot = 1)');
    await q.query('ALTER TABLE migration_registry ADD PRIMARY KEY (slot)');
  }
}
