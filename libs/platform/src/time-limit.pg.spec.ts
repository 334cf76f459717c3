import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestDatabase, createTestDatabase } from '../../../test/pg/test-database.js';
import { eventually } from '../../../test/e2e/helpers.js';
import { poolQuery } from './database.js';
import { remainingTimeMs, timeLimitField, withTimeLimit } from './time-limit.js';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase('shard');
});

afterAll(async () => {
  await db?.drop();
});

const sleeping = async () =>
  (
    await poolQuery<{ n: string }>(
      db.dataSource,
      `SELECT count(*) AS n FROM pg_stat_activity WHERE state = 'active' AND query LIKE 'SELECT pg_sleep%'`,
      [],
    )
  )[0]!.n;

describe('maxTimeMS', () => {
  it('cancels the statement in Postgres when the time runs out, not only the wait for it', async () => {
    await expect(withTimeLimit(200, () => poolQuery(db.dataSource, 'SELECT pg_sleep(3)', []))).rejects.toMatchObject({
      code: 'MAX_TIME_MS_EXPIRED',
      message: expect.stringContaining('maxTimeMS: 200'),
    });
    // Well before the 3 s the statement would sleep, Postgres no longer runs it.
    await eventually(async () => ((await sleeping()) === '0' ? true : undefined), 'the sleeping statement cancelled', 1_500);
  });

  it('runs statements that finish in time as without a limit, and none at all without one', async () => {
    expect(await withTimeLimit(5_000, () => poolQuery<{ one: number }>(db.dataSource, 'SELECT 1 AS one', []))).toEqual([{ one: 1 }]);
    expect(await withTimeLimit(0, async () => remainingTimeMs())).toBeUndefined();
    expect(await withTimeLimit(undefined, async () => timeLimitField())).toEqual({});
    const field = await withTimeLimit(60_000, async () => timeLimitField());
    expect(field.maxTimeMS).toBeGreaterThan(0);
    expect(field.maxTimeMS).toBeLessThanOrEqual(60_000);
  });
});
