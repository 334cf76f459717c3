import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shardMigrations } from '@tessera/migrations';
import { type TestDatabase, createTestDatabase } from '../../../../test/pg/test-database.js';
import { CollectionStorageService, tableName } from './collection-storage.service.js';

const ShardKeySizes = shardMigrations.find((m) => m.name === 'ShardKeySizes1763902000000')!;
let db: TestDatabase;
let storage: CollectionStorageService;

beforeAll(async () => {
  db = await createTestDatabase('shard');
  storage = new CollectionStorageService(db.dataSource);
});
afterAll(async () => db?.drop());

async function shardKeyIndex(table: string): Promise<string> {
  const rows: Array<{ indexdef: string }> = await db.dataSource.query('SELECT indexdef FROM pg_indexes WHERE indexname = $1', [
    `${table}_shard_key`,
  ]);
  return rows[0]!.indexdef;
}

describe('the shard key index', () => {
  it('carries the documents sizes, so that sizes of key ranges are index-only scans', async () => {
    const uuid = randomUUID();
    await storage.createCollection(uuid, { ns: `db.c${uuid.slice(0, 8)}`, keyPattern: { x: 1 } });
    expect(await shardKeyIndex(tableName(uuid))).toMatch(/\(shard_key\) INCLUDE \(size\)$/);
  });

  it('is rebuilt with the sizes by the migration for tables made before, unique ones staying unique', async () => {
    const plain = randomUUID();
    const unique = randomUUID();
    await storage.createCollection(plain, { ns: `db.c${plain.slice(0, 8)}`, keyPattern: { x: 1 } });
    await storage.createCollection(unique, { ns: `db.c${unique.slice(0, 8)}`, keyPattern: { x: 1 }, unique: true });
    const runner = db.dataSource.createQueryRunner();
    try {
      await new ShardKeySizes().down(runner);
      expect(await shardKeyIndex(tableName(plain))).toMatch(/\(shard_key\)$/);
      await new ShardKeySizes().up(runner);
    } finally {
      await runner.release();
    }
    expect(await shardKeyIndex(tableName(plain))).toMatch(/^CREATE INDEX .*\(shard_key\) INCLUDE \(size\)$/);
    expect(await shardKeyIndex(tableName(unique))).toMatch(/^CREATE UNIQUE INDEX .*\(shard_key\) INCLUDE \(size\)$/);
  });
});
