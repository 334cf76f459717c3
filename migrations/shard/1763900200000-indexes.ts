import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The shard's secondary indexes. Each index is a side table of its own (`x_<collection uuid
 * hex>_<suffix>`, created by createIndexes) holding `(key bytea, id bytea)`: the index key in
 * libs/core's order-preserving encoding and the document's encoded `_id`, unique on `key` for a
 * unique index. Not Postgres expression indexes: those would order values by Postgres' json
 * rules, not MongoDB's cross-type order, and could not expand arrays (multikey).
 */
export class Indexes1763900200000 implements MigrationInterface {
  name = 'Indexes1763900200000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE indexes (
        collection_uuid uuid NOT NULL REFERENCES collections (uuid) ON DELETE CASCADE,
        name text NOT NULL,
        key_pattern json NOT NULL,
        is_unique boolean NOT NULL DEFAULT false,
        table_name text NOT NULL UNIQUE,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (collection_uuid, name)
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE indexes');
  }
}
