import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `chunks.estimated_documents`: how many documents a shard counted in a chunk when it last
 * measured it, reported with `estimated_size_bytes` (the two describe the same measurement).
 * Null until a shard reports a count; a chunk a split or merge writes has none of its own.
 */
export class ChunkDocumentEstimates1764300000000 implements MigrationInterface {
  name = 'ChunkDocumentEstimates1764300000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE chunks ADD COLUMN estimated_documents bigint');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE chunks DROP COLUMN estimated_documents');
  }
}
