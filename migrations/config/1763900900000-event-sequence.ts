import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The changelog becomes the cluster's event stream. Each row gets a cluster-wide `seq` and is
 * announced with NOTIFY, both when its transaction commits, by a deferred constraint trigger:
 *
 * - The trigger runs at commit time and takes one advisory transaction lock before drawing the
 *   next value, and holds it until the commit is done. So `seq` order is commit order: a row
 *   with a higher `seq` is never visible before one with a lower `seq`, and a reader that has
 *   seen `seq` N and reads `seq > N` later misses nothing. (A bigserial id alone is drawn at
 *   insert time, so a later id may commit first, and a resume from it would skip the earlier.)
 * - NOTIFY is delivered after commit, in commit order, to every config process that LISTENs on
 *   `tessera_events`. A payload is the whole row as JSON when it fits under NOTIFY's 8000-byte
 *   limit, else `{seq, id, truncated: true}` and the listener reads the row by id.
 * - A sequence value drawn by a transaction that then fails to commit leaves a gap; readers
 *   skip a gap once a higher `seq` has arrived (which proves the lower one never committed).
 */
export class EventSequence1763900900000 implements MigrationInterface {
  name = 'EventSequence1763900900000';

  async up(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE changelog ADD COLUMN seq bigint');
    await q.query(
      'UPDATE changelog SET seq = numbered.n FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM changelog) numbered WHERE changelog.id = numbered.id',
    );
    await q.query('CREATE UNIQUE INDEX changelog_seq ON changelog (seq)');
    await q.query('CREATE INDEX changelog_what_time ON changelog (what, time)');
    await q.query('CREATE SEQUENCE changelog_event_seq');
    await q.query("SELECT setval('changelog_event_seq', (SELECT coalesce(max(seq), 0) + 1 FROM changelog), false)");
    await q.query(`
      CREATE FUNCTION changelog_publish() RETURNS trigger LANGUAGE plpgsql AS $$
      DECLARE
        next bigint;
        payload text;
      BEGIN
        -- 0x7e5e9 = the event sequence's lock; held to the end of the commit.
        PERFORM pg_advisory_xact_lock(517609);
        next := nextval('changelog_event_seq');
        UPDATE changelog SET seq = next WHERE id = NEW.id;
        payload := json_build_object('seq', next, 'id', NEW.id, 'time', NEW.time, 'server', NEW.server,
          'shard', NEW.shard, 'what', NEW.what, 'ns', NEW.ns, 'details', NEW.details)::text;
        IF octet_length(payload) > 7900 THEN
          payload := json_build_object('seq', next, 'id', NEW.id, 'truncated', true)::text;
        END IF;
        PERFORM pg_notify('tessera_events', payload);
        RETURN NULL;
      END $$`);
    await q.query(`
      CREATE CONSTRAINT TRIGGER changelog_publish AFTER INSERT ON changelog
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION changelog_publish()`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TRIGGER changelog_publish ON changelog');
    await q.query('DROP FUNCTION changelog_publish()');
    await q.query('DROP SEQUENCE changelog_event_seq');
    await q.query('DROP INDEX changelog_what_time');
    await q.query('DROP INDEX changelog_seq');
    await q.query('ALTER TABLE changelog DROP COLUMN seq');
  }
}
