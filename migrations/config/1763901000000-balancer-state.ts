import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The balancer's persisted state: each collection's defragmentation state (the pure machine's
 * plain data: phase, measured sizes, actions in flight; MongoDB keeps the phase in
 * config.collections and the sizes in config.chunks), so a new leader resumes where the last
 * one was; and why each active migration was started (`imbalance`, `topChunk`, ...), so its
 * commit's changelog row can say.
 */
export class BalancerState1763901000000 implements MigrationInterface {
  name = 'BalancerState1763901000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE collections ADD COLUMN defragmentation_state jsonb');
    await q.query('ALTER TABLE active_migrations ADD COLUMN reason text');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE active_migrations DROP COLUMN reason');
    await q.query('ALTER TABLE collections DROP COLUMN defragmentation_state');
  }
}
