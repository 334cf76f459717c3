import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestDatabase, createTestDatabase } from '../../../test/pg/test-database.js';
import { eventually } from '../../../test/e2e/helpers.js';
import { poolQuery } from './database.js';
import { raceTimeLimit, remainingTimeMs, timeLimitField, timeLimitOf } from './time-limit.js';

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
    await expect(poolQuery(db.dataSource, 'SELECT pg_sleep(3)', [], timeLimitOf(200))).rejects.toMatchObject({
      code: 'MAX_TIME_MS_EXPIRED',
      message: expect.stringContaining('maxTimeMS: 200'),
    });
    // Well before the 3 s the statement would sleep, Postgres no longer runs it.
    await eventually(async () => ((await sleeping()) === '0' ? true : undefined), 'the sleeping statement cancelled', 1_500);
  });

  it('answers at the limit while the work goes on, and runs what finishes in time as without one', async () => {
    await expect(raceTimeLimit(timeLimitOf(50), () => new Promise(() => undefined))).rejects.toMatchObject({ code: 'MAX_TIME_MS_EXPIRED' });
    expect(await poolQuery<{ one: number }>(db.dataSource, 'SELECT 1 AS one', [], timeLimitOf(5_000))).toEqual([{ one: 1 }]);
    expect(timeLimitOf(0)).toBeUndefined();
    expect(remainingTimeMs(undefined)).toBeUndefined();
    expect(timeLimitField(undefined)).toEqual({});
    const field = timeLimitField(timeLimitOf(60_000));
    expect(field.maxTimeMS).toBeGreaterThan(0);
    expect(field.maxTimeMS).toBeLessThanOrEqual(60_000);
    expect(() => remainingTimeMs({ deadline: Date.now() - 1, maxTimeMS: 5 })).toThrow(
      expect.objectContaining({ code: 'MAX_TIME_MS_EXPIRED' }),
    );
  });
});
