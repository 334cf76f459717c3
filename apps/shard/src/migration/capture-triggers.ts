import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { DataSource } from 'typeorm';
import { TesseraError } from '@tessera/core';
import { databaseErrorCode } from '@tessera/platform';

/** How long a CREATE or DROP TRIGGER may wait in a table's lock queue before it gives up and retries. */
export const TRIGGER_LOCK_TIMEOUT_MS = 50;
/** Delay before retrying drops that timed out. */
export const DROP_RETRY_MS = 1_000;
/** Delay between attempts to create a trigger, and how long a donation tries before it gives up. */
const CREATE_RETRY_MS = 200;
const CREATE_DEADLINE_MS = 10_000;
/**
 * A creation's lock_timeout while autovacuum works on the table: longer than Postgres'
 * deadlock_timeout (1 s by default), after which an autovacuum that blocks a lock request cancels
 * itself. With the short timeout the request would never wait long enough for that, and a
 * vacuum of a big table, which follows every bulk load, would hold the migration off for minutes.
 */
const CREATE_LOCK_TIMEOUT_UNDER_AUTOVACUUM_MS = 5_000;

/** The trigger that captures a donated range's writes into `migration_mods` (see the shard migrations). */
export function captureTriggerName(migrationId: string): string {
  return `tessera_migration_${migrationId.replaceAll('-', '')}`;
}

/** Postgres' lock_not_available: a lock_timeout ran out. */
function isLockTimeout(error: unknown): boolean {
  return databaseErrorCode(error) === '55P03';
}

/**
 * The triggers that capture a donated range's writes, created and dropped without stalling the
 * collection. A trigger's DDL waits for the table's lock, and every read and write of the
 * collection that comes after waits behind it in the lock queue: DROP TRIGGER takes ACCESS
 * EXCLUSIVE (it waits for every query under way, a long scan included), CREATE TRIGGER takes
 * SHARE ROW EXCLUSIVE (it waits for the writes under way). So each waits at most
 * `TRIGGER_LOCK_TIMEOUT_MS` and tries again: a creation every `CREATE_RETRY_MS` for up to
 * `CREATE_DEADLINE_MS` (then the donation fails, retryably); a drop every `DROP_RETRY_MS` until
 * it succeeds. Autovacuum is the exception (see `CREATE_LOCK_TIMEOUT_UNDER_AUTOVACUUM_MS`): a
 * creation waits long enough for Postgres to cancel it, a drop waits until it is done.
 * Meanwhile a trigger left to drop may still capture a write in the range (the range
 * deleter's, say): such rows belong to no running migration and go with the trigger.
 */
export class CaptureTriggers {
  /** Trigger name → the migration and table of a drop still to do. */
  private readonly pending = new Map<string, { migrationId: string | undefined; table: string }>();
  private retry: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    private readonly dataSource: DataSource,
    private readonly logger: Logger,
  ) {}

  /** Triggers whose drop is still to do. */
  get pendingDrops(): string[] {
    return [...this.pending.keys()];
  }

  /** Creates the trigger that captures into `migration_mods` the `_id` of every write to [min, max) of `table`. */
  async create(migrationId: string, table: string, min: Buffer, max: Buffer): Promise<void> {
    const deadline = Date.now() + CREATE_DEADLINE_MS;
    for (;;) {
      const vacuuming = await this.autovacuuming(table);
      if (vacuuming) this.logger.info({ table, migrationId }, `autovacuum holds ${table}: waiting for Postgres to cancel it`);
      const timeout = vacuuming ? CREATE_LOCK_TIMEOUT_UNDER_AUTOVACUUM_MS : TRIGGER_LOCK_TIMEOUT_MS;
      try {
        await this.dataSource.transaction(async (manager) => {
          await manager.query(`SET LOCAL lock_timeout = '${timeout}ms'`);
          await manager.query(
            `CREATE TRIGGER ${captureTriggerName(migrationId)} AFTER INSERT OR UPDATE OR DELETE ON ${table}
             FOR EACH ROW EXECUTE FUNCTION tessera_capture_migration_mod('${migrationId}', '${min.toString('hex')}', '${max.toString('hex')}')`,
          );
        });
        return;
      } catch (error) {
        if (!isLockTimeout(error)) throw error;
        if (Date.now() >= deadline) {
          throw new TesseraError(
            'CONFLICTING_OPERATION',
            `writes to the collection kept its table busy for ${CREATE_DEADLINE_MS / 1000} s: the migration did not start capturing them; try it again`,
            { details: { migrationId } },
          );
        }
        await sleep(CREATE_RETRY_MS);
      }
    }
  }

  /** Drops the capture trigger of `migrationId` on `table` and its captured writes, now or, if the table is busy, soon. */
  async drop(migrationId: string, table: string): Promise<void> {
    this.pending.set(captureTriggerName(migrationId), { migrationId, table });
    await this.dropPending();
  }

  /**
   * Drops every capture trigger no migration in `active` owns, and the captured writes of any
   * other migration (a crash between a donation's end and its drop leaves both behind).
   */
  async dropStray(active: readonly string[]): Promise<void> {
    const owned = new Set(active.map(captureTriggerName));
    const triggers: Array<{ name: string; table: string }> = await this.dataSource.query(
      `SELECT t.tgname AS name, c.relname AS table FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid WHERE t.tgname LIKE 'tessera_migration_%'`,
    );
    for (const trigger of triggers) {
      if (!owned.has(trigger.name)) this.pending.set(trigger.name, { migrationId: migrationIdOf(trigger.name), table: trigger.table });
    }
    await this.dropPending();
    await this.dataSource.query('DELETE FROM migration_mods WHERE NOT (migration_id = ANY($1::uuid[]))', [[...active]]);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.retry);
  }

  private async dropPending(): Promise<void> {
    for (const [trigger, { migrationId, table }] of this.pending) {
      // Not while autovacuum works on the table: its lock would refuse every attempt, each of which
      // holds the table's readers up for the lock timeout. The trigger can wait.
      if (await this.autovacuuming(table)) continue;
      try {
        await this.dataSource.transaction(async (manager) => {
          await manager.query(`SET LOCAL lock_timeout = '${TRIGGER_LOCK_TIMEOUT_MS}ms'`);
          const exists: Array<{ t: string | null }> = await manager.query('SELECT to_regclass($1) AS t', [table]);
          if (exists[0]?.t !== null) await manager.query(`DROP TRIGGER IF EXISTS ${trigger} ON ${table}`);
        });
      } catch (error) {
        if (!isLockTimeout(error)) throw error;
        this.logger.debug({ trigger, table }, `${table} is busy: the drop of ${trigger} is retried in ${DROP_RETRY_MS} ms`);
        continue;
      }
      this.pending.delete(trigger);
      // Only now: until the trigger is gone it may add rows.
      if (migrationId !== undefined) await this.dataSource.query('DELETE FROM migration_mods WHERE migration_id = $1', [migrationId]);
    }
    this.scheduleRetry();
  }

  /**
   * Whether an autovacuum worker holds a lock on `table`. From pg_locks and the workers'
   * backend type, which any role may read (the text of their queries only privileged roles may).
   */
  private async autovacuuming(table: string): Promise<boolean> {
    const rows: unknown[] = await this.dataSource.query(
      `SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
        WHERE l.relation = to_regclass($1) AND l.granted AND a.backend_type = 'autovacuum worker'`,
      [table],
    );
    return rows.length > 0;
  }

  private scheduleRetry(): void {
    if (this.pending.size === 0 || this.stopped || this.retry !== undefined) return;
    this.retry = setTimeout(() => {
      this.retry = undefined;
      this.dropPending().catch((error: unknown) => {
        this.logger.warn({ err: error }, `dropping capture triggers failed: ${(error as Error).message}`);
        this.scheduleRetry();
      });
    }, DROP_RETRY_MS);
    this.retry.unref();
  }
}

/** The migration id in a capture trigger's name (`captureTriggerName` backwards); undefined for another name. */
function migrationIdOf(trigger: string): string | undefined {
  const hex = /^tessera_migration_([0-9a-f]{32})$/.exec(trigger)?.[1];
  return hex && `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
