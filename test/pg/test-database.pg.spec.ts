import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestDatabase, createTestDatabase } from './test-database.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('config');
});
afterAll(async () => db?.drop());

describe('a migrated config database', () => {
  it('has every catalog table, with the vector clock row in place', async () => {
    const tables: Array<{ table_name: string }> = await db.dataSource.query(
      "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name",
    );
    expect(tables.map((t) => t.table_name)).toEqual(
      expect.arrayContaining(['changelog', 'chunks', 'collections', 'databases', 'ddl_coordinators', 'leader_lease', 'active_migrations', 'locks', 'lockpings', 'mongos', 'settings', 'shards', 'tags', 'vector_clock', 'version']),
    );
    expect(await db.dataSource.query('SELECT count(*)::int AS n FROM vector_clock')).toEqual([{ n: 1 }]);
  });

  it('refuses a chunk whose min is not below its max', async () => {
    await db.dataSource.query("INSERT INTO shards (name, url) VALUES ('s', 'http://s:1')");
    await db.dataSource.query("INSERT INTO databases (name, primary_shard, version_uuid, version_last_mod) VALUES ('d', 's', gen_random_uuid(), 1)");
    await db.dataSource.query(
      "INSERT INTO collections (ns, db, uuid, epoch, timestamp_t, timestamp_i, key_pattern) VALUES ('d.c', 'd', gen_random_uuid(), 'e', 1, 1, '{\"x\":1}')",
    );
    await expect(
      db.dataSource.query(
        "INSERT INTO chunks (collection_uuid, min, max, min_ejson, max_ejson, shard, major, minor) SELECT uuid, '\\\\x02'::bytea, '\\\\x01'::bytea, '', '', 's', 1, 0 FROM collections",
      ),
    ).rejects.toThrow(/chunks_check/);
  });
});
