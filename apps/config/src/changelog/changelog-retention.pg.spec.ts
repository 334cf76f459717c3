import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestDatabase, createTestDatabase } from '../../../../test/pg/test-database.js';
import { pruneChangelog } from './changelog-retention.service.js';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase('config');
});
afterAll(async () => db?.drop());

async function kept(): Promise<number[]> {
  const rows: Array<{ i: number }> = await db.dataSource.query("SELECT (details->>'i')::int AS i FROM changelog ORDER BY seq");
  return rows.map((r) => r.i);
}

describe('changelog retention', () => {
  it('deletes the oldest rows beyond the newest maxRows, in batches, and then nothing', async () => {
    await db.dataSource.query('DELETE FROM changelog');
    // One row per transaction, so that each gets its seq at its own commit, in order.
    for (let i = 1; i <= 25; i++) {
      await db.dataSource.query("INSERT INTO changelog (server, what, details) VALUES ('test', 'test.row', $1)", [JSON.stringify({ i })]);
    }
    expect(await pruneChangelog(db.dataSource, 10, 4)).toBe(15);
    expect(await kept()).toEqual(Array.from({ length: 10 }, (_, i) => 16 + i));
    expect(await pruneChangelog(db.dataSource, 10, 4)).toBe(0);
  });

  it('leaves a changelog under the cap alone', async () => {
    expect(await pruneChangelog(db.dataSource, 11)).toBe(0);
    expect(await pruneChangelog(db.dataSource, 10)).toBe(0);
    expect(await kept()).toHaveLength(10);
  });
});
