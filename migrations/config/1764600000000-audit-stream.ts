import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The audit log as a stream: every row inserted into `audit_log` is announced on the
 * `tessera_audit` channel with its seq, for the config servers' socket.io `topic:audit`.
 */
export class AuditStream1764600000000 implements MigrationInterface {
  name = 'AuditStream1764600000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE FUNCTION audit_log_notify() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM pg_notify('tessera_audit', NEW.seq::text);
        RETURN NULL;
      END $$`);
    await q.query('CREATE TRIGGER audit_log_notify AFTER INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION audit_log_notify()');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TRIGGER audit_log_notify ON audit_log');
    await q.query('DROP FUNCTION audit_log_notify()');
  }
}
