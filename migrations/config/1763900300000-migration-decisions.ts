import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The decision of each migration, written by its commit (`committed`) or, when a donor that
 * restarted asks for a decision that was never made, as `aborted`: the primary key makes the
 * two exclude each other, so a commit still in flight when a donor recovers cannot land after
 * the donor decided to abort.
 */
export class MigrationDecisions1763900300000 implements MigrationInterface {
  name = 'MigrationDecisions1763900300000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE migration_decisions (
        id uuid PRIMARY KEY,
        decision text NOT NULL CHECK (decision IN ('committed', 'aborted')),
        decided_at timestamptz NOT NULL DEFAULT now()
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE migration_decisions');
  }
}
