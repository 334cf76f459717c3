import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Versions of documents for reads at a past ClusterTime (snapshot reads, and the next issue's
 * transactions). Each collection table gains `valid_from`: the ClusterTime of the write that
 * stored the row, as a sortable int8 (`clusterTimeToSql`). A row's update or delete copies the old
 * version into `document_history` with `valid_to`, the ClusterTime of that write, which the
 * writing transaction names in the setting `tessera.write_time`; a row trigger on each collection
 * table (`document_history_trigger`) does the copy, so no write path can forget it. A version is
 * visible at time T when valid_from <= T < valid_to. The shard trims versions whose `valid_to`
 * left minSnapshotHistoryWindowInSeconds. The transaction also says in `tessera.keep_history`
 * whether versions are kept at all (off when the window is 0).
 *
 * `shard_clock` (one row) keeps what the shard's ClusterTime needs across restarts: `ceiling`,
 * a time no write of this process has reached (a restart starts its clock there, so a new version
 * never gets an older time than one already stored), and `history_since`, from when versions are
 * kept (null while history is off): a read before it would miss versions, so it is refused.
 */
/**
 * What a row stored without a `valid_from` gets: the time its transaction declared (COPY of a
 * migration's cloned batch has no parameters). A transaction that declared none fails. The same
 * text as `VALID_FROM_DEFAULT` in apps/shard/src/history/write-time.ts: a migration stays as it
 * ran and imports no app code.
 */
const VALID_FROM_DEFAULT = "current_setting('tessera.write_time')::int8";

export class DocumentHistory1764300000000 implements MigrationInterface {
  name = 'DocumentHistory1764300000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE document_history (
        collection_uuid uuid NOT NULL,
        id bytea NOT NULL,
        shard_key bytea NOT NULL,
        doc json NOT NULL,
        size integer NOT NULL,
        valid_from int8 NOT NULL,
        valid_to int8 NOT NULL
      )`);
    await q.query('CREATE INDEX document_history_key ON document_history (collection_uuid, shard_key)');
    await q.query('CREATE INDEX document_history_valid_to ON document_history (valid_to)');
    await q.query(`
      CREATE FUNCTION keep_document_history() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF current_setting('tessera.keep_history') = 'off' THEN
          RETURN NULL;
        END IF;
        INSERT INTO document_history (collection_uuid, id, shard_key, doc, size, valid_from, valid_to)
        VALUES (TG_ARGV[0]::uuid, OLD.id, OLD.shard_key, OLD.doc, OLD.size, OLD.valid_from, current_setting('tessera.write_time')::int8);
        RETURN NULL;
      END $$`);
    await q.query('CREATE TABLE shard_clock (ceiling int8 NOT NULL, history_since int8)');
    await q.query('INSERT INTO shard_clock (ceiling, history_since) VALUES (-9223372036854775808, NULL)');
    const tables: Array<{ uuid: string; table_name: string }> = await q.query('SELECT uuid, table_name FROM collections');
    for (const { uuid, table_name } of tables) {
      // A constant default is only catalog work; rows from before have no known time.
      await q.query(`ALTER TABLE ${table_name} ADD COLUMN valid_from int8 NOT NULL DEFAULT -9223372036854775808`);
      await q.query(`ALTER TABLE ${table_name} ALTER COLUMN valid_from SET DEFAULT ${VALID_FROM_DEFAULT}`);
      await q.query(
        `CREATE TRIGGER document_history_trigger AFTER UPDATE OF doc OR DELETE ON ${table_name}
         FOR EACH ROW EXECUTE FUNCTION keep_document_history('${uuid}')`,
      );
    }
  }

  async down(q: QueryRunner): Promise<void> {
    const tables: Array<{ table_name: string }> = await q.query('SELECT table_name FROM collections');
    for (const { table_name } of tables) {
      await q.query(`DROP TRIGGER IF EXISTS document_history_trigger ON ${table_name}`);
      await q.query(`ALTER TABLE ${table_name} DROP COLUMN valid_from`);
    }
    await q.query('DROP TABLE shard_clock');
    await q.query('DROP FUNCTION keep_document_history()');
    await q.query('DROP TABLE document_history');
  }
}
