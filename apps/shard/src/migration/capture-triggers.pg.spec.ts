import { randomUUID } from 'node:crypto';
import pg from 'pg';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type TestDatabase, createTestDatabase } from '../../../../test/pg/test-database.js';
import { CollectionStorageService, tableName } from '../collections/collection-storage.service.js';
import { CaptureTriggers, captureTriggerName } from './capture-triggers.js';
import { writeTimeNow } from '../../../../test/fakes/write-times.js';
import { declareWriteTime } from '../history/write-time.js';

let db: TestDatabase;
let captures: CaptureTriggers;

beforeAll(async () => {
  db = await createTestDatabase('shard');
  captures = new CaptureTriggers(db.dataSource, pino({ level: 'silent' }));
});
afterAll(async () => {
  captures?.stop();
  await db?.drop();
});

/** A collection table with a donation's capture trigger on the whole key space, and one captured write. */
async function donation(): Promise<{ migrationId: string; table: string }> {
  const uuid = randomUUID();
  await new CollectionStorageService(db.dataSource).createCollection(uuid, { ns: `db.c${uuid.slice(0, 8)}`, keyPattern: { x: 1 } });
  const table = tableName(uuid);
  const migrationId = randomUUID();
  await captures.create(migrationId, table, Buffer.from([0x00]), Buffer.from([0xff]));
  await db.dataSource.query(`INSERT INTO ${table} (id, shard_key, doc, size, valid_from) VALUES ('\\x01', '\\x10', '{}', 2, 0)`);
  return { migrationId, table };
}

async function triggerExists(migrationId: string): Promise<boolean> {
  const rows: unknown[] = await db.dataSource.query('SELECT 1 FROM pg_trigger WHERE tgname = $1', [captureTriggerName(migrationId)]);
  return rows.length > 0;
}

async function captured(migrationId: string): Promise<number> {
  const rows: Array<{ n: number }> = await db.dataSource.query('SELECT count(*)::int AS n FROM migration_mods WHERE migration_id = $1', [
    migrationId,
  ]);
  return rows[0]!.n;
}

describe('capture triggers', () => {
  it('drops a trigger and its captured writes', async () => {
    const { migrationId, table } = await donation();
    expect(await captured(migrationId)).toBe(1);
    await captures.drop(migrationId, table);
    expect(await triggerExists(migrationId)).toBe(false);
    expect(await captured(migrationId)).toBe(0);
  });

  it('does not queue behind a long query on the table, so the collection stays readable, and drops once the query ends', async () => {
    const { migrationId, table } = await donation();
    const long = new pg.Client({ connectionString: db.url });
    await long.connect();
    try {
      // A reader's transaction keeps its lock on the table until it ends, as a long scan would.
      await long.query('BEGIN');
      await long.query(`SELECT count(*) FROM ${table}`);
      await captures.drop(migrationId, table);
      expect(await triggerExists(migrationId)).toBe(true);
      expect(captures.pendingDrops).toContain(captureTriggerName(migrationId));
      // No DROP waits in the lock queue: another reader gets through.
      expect(await db.dataSource.query(`SELECT count(*)::int AS n FROM ${table}`)).toEqual([{ n: 1 }]);
      await long.query('COMMIT');
    } finally {
      await long.end();
    }
    await vi.waitFor(async () => expect(await triggerExists(migrationId)).toBe(false), { timeout: 10_000, interval: 100 });
    await vi.waitFor(async () => expect(await captured(migrationId)).toBe(0), { timeout: 10_000, interval: 100 });
    expect(captures.pendingDrops).toEqual([]);
  });

  it('waits for a long write to end before capturing, without holding up the writes that come meanwhile', async () => {
    const uuid = randomUUID();
    await new CollectionStorageService(db.dataSource).createCollection(uuid, { ns: `db.c${uuid.slice(0, 8)}`, keyPattern: { x: 1 } });
    const table = tableName(uuid);
    const long = new pg.Client({ connectionString: db.url });
    await long.connect();
    const migrationId = randomUUID();
    let created = false;
    try {
      await long.query('BEGIN');
      await long.query(`INSERT INTO ${table} (id, shard_key, doc, size, valid_from) VALUES ('\\x01', '\\x10', '{}', 2, 0)`);
      const creating = captures.create(migrationId, table, Buffer.from([0x00]), Buffer.from([0xff])).then(() => (created = true));
      // Once the capture waits for the table, another write still goes through.
      await vi.waitFor(
        async () => {
          const waiting: unknown[] = await db.dataSource.query(
            "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'CREATE TRIGGER%'",
          );
          expect(waiting.length).toBeGreaterThan(0);
        },
        { timeout: 10_000, interval: 10 },
      );
      await db.dataSource.query(`INSERT INTO ${table} (id, shard_key, doc, size, valid_from) VALUES ('\\x02', '\\x20', '{}', 2, 0)`);
      expect(created).toBe(false);
      await long.query('COMMIT');
      await creating;
    } finally {
      await long.end();
    }
    expect(await triggerExists(migrationId)).toBe(true);
    await db.dataSource.transaction(async (manager) => {
      await declareWriteTime(manager, writeTimeNow());
      await manager.query(`DELETE FROM ${table}`);
    });
    expect(await captured(migrationId)).toBe(2);
    await captures.drop(migrationId, table);
  });

  it('drops the triggers and captured writes of migrations no longer running, and keeps those of running ones', async () => {
    const stray = await donation();
    const running = await donation();
    await captures.dropStray([running.migrationId]);
    expect(await triggerExists(stray.migrationId)).toBe(false);
    expect(await captured(stray.migrationId)).toBe(0);
    expect(await triggerExists(running.migrationId)).toBe(true);
    expect(await captured(running.migrationId)).toBe(1);
    await captures.drop(running.migrationId, running.table);
  });
});
