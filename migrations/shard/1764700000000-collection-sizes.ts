import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Each collection's stored bytes and documents, kept up to date by the writes themselves, so that
 * `statsForBalancing` costs the changes since it last asked instead of a read of every table.
 *
 * - `collection_sizes` holds one row per collection: its totals as of the last fold.
 * - Statement triggers on each collection table (`size_insert_trigger`, `size_update_trigger`,
 *   `size_delete_trigger`) append each statement's change to `collection_size_changes`. An
 *   append takes no lock that another writer waits for, where an update of the totals' row would
 *   make every write of a collection wait for the one before to commit. The changes commit or roll
 *   back with the writes, and COPY (a migration's clone) fires the insert trigger too.
 * - A reader folds the changes into the totals, in one statement (`ChunkSizingService`).
 */
export class CollectionSizes1764700000000 implements MigrationInterface {
  name = 'CollectionSizes1764700000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query('CREATE TABLE collection_sizes (collection_uuid uuid PRIMARY KEY, bytes int8 NOT NULL, documents int8 NOT NULL)');
    await q.query('CREATE TABLE collection_size_changes (collection_uuid uuid NOT NULL, bytes int8 NOT NULL, documents int8 NOT NULL)');
    // One function for the three triggers: each names its transition tables `new_rows` and `old_rows`.
    await q.query(`
      CREATE FUNCTION note_size_change() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'INSERT' THEN
          INSERT INTO collection_size_changes (collection_uuid, bytes, documents)
          SELECT TG_ARGV[0]::uuid, sum(size), count(*) FROM new_rows HAVING count(*) > 0;
        ELSIF TG_OP = 'DELETE' THEN
          INSERT INTO collection_size_changes (collection_uuid, bytes, documents)
          SELECT TG_ARGV[0]::uuid, -sum(size), -count(*) FROM old_rows HAVING count(*) > 0;
        ELSE
          INSERT INTO collection_size_changes (collection_uuid, bytes, documents)
          SELECT TG_ARGV[0]::uuid, changed.bytes, 0
            FROM (SELECT (SELECT coalesce(sum(size), 0) FROM new_rows) - (SELECT coalesce(sum(size), 0) FROM old_rows) AS bytes) changed
           WHERE changed.bytes <> 0;
        END IF;
        RETURN NULL;
      END $$`);
    const tables: Array<{ uuid: string; table_name: string }> = await q.query('SELECT uuid, table_name FROM collections');
    for (const { uuid, table_name } of tables) {
      await q.query(sizeTriggersSql(table_name, uuid));
      await q.query(`INSERT INTO collection_sizes SELECT $1, coalesce(sum(size), 0), count(*) FROM ${table_name}`, [uuid]);
    }
  }

  async down(q: QueryRunner): Promise<void> {
    const tables: Array<{ table_name: string }> = await q.query('SELECT table_name FROM collections');
    for (const { table_name } of tables)
      for (const trigger of ['size_insert_trigger', 'size_update_trigger', 'size_delete_trigger'])
        await q.query(`DROP TRIGGER IF EXISTS ${trigger} ON ${table_name}`);
    await q.query('DROP FUNCTION note_size_change()');
    await q.query('DROP TABLE collection_size_changes, collection_sizes');
  }
}

/**
 * The three size triggers of one collection table. The same text as `sizeTriggersSql` in
 * apps/shard/src/collections/collection-storage.service.ts: a migration stays as it ran and
 * imports no app code.
 */
function sizeTriggersSql(table: string, uuid: string): string {
  return `
    CREATE OR REPLACE TRIGGER size_insert_trigger AFTER INSERT ON ${table} REFERENCING NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION note_size_change('${uuid}');
    CREATE OR REPLACE TRIGGER size_update_trigger AFTER UPDATE ON ${table} REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION note_size_change('${uuid}');
    CREATE OR REPLACE TRIGGER size_delete_trigger AFTER DELETE ON ${table} REFERENCING OLD TABLE AS old_rows
      FOR EACH STATEMENT EXECUTE FUNCTION note_size_change('${uuid}');`;
}
