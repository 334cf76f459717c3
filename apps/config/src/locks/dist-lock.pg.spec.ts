import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TesseraError } from '@tessera/core';
import { type TestDatabase, createTestDatabase } from '../../../../test/pg/test-database.js';
import type { ConfigSettings } from '../config.settings.js';
import { DistLockService } from './dist-lock.service.js';

let db: TestDatabase;
const settings = { TESSERA_LOCK_TAKEOVER_MS: 1_000, TESSERA_LOCK_WAIT_MS: 300, TESSERA_LOCK_PING_INTERVAL_MS: 100 } as ConfigSettings;
const silent = pino({ level: 'silent' });

beforeAll(async () => {
  db = await createTestDatabase('config');
});
afterAll(async () => db?.drop());

/** A lock service as a separate config process would have, with its own pool. */
async function configProcess(): Promise<DistLockService> {
  return new DistLockService(await db.connect(), settings, silent);
}

async function busy(promise: Promise<unknown>): Promise<TesseraError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(error instanceof TesseraError)) throw new Error(`expected LOCK_BUSY, got ${String(error)}`);
  return error;
}

describe('distributed locks', () => {
  it('are exclusive between operations and answer LOCK_BUSY naming the holder after the wait', async () => {
    const a = await configProcess();
    const b = await configProcess();
    const held = await a.acquire('db1', 'op-a', 'shardCollection db1.x');
    const started = Date.now();
    const error = await busy(b.acquire('db1', 'op-b', 'dropDatabase db1'));
    expect(error.code).toBe('LOCK_BUSY');
    expect(error.retryable).toBe(true);
    expect(error.message).toContain('shardCollection db1.x');
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    await held.release();
    const next = await b.acquire('db1', 'op-b', 'dropDatabase db1');
    await next.release();
  });

  it('are re-entrant for the same operation, so a resumed coordinator takes its own locks back', async () => {
    const a = await configProcess();
    const b = await configProcess();
    await a.acquire('db2', 'op-1', 'first run');
    const resumed = await b.acquire('db2', 'op-1', 'resumed run', 0);
    expect(resumed.operation).toBe('op-1');
    await resumed.release();
  });

  it('are taken over once their process has stopped pinging past the takeover timeout', async () => {
    const dead = await configProcess();
    const alive = await configProcess();
    await dead.acquire('db3', 'op-dead', 'a process that will die');
    expect((await busy(alive.acquire('db3', 'op-alive', 'waiting', 100))).code).toBe('LOCK_BUSY');
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    const taken = await alive.acquire('db3', 'op-alive', 'takeover', 0);
    const rows: Array<{ process: string; operation: string }> = await db.dataSource.query(
      "SELECT process, operation FROM locks WHERE resource = 'db3'",
    );
    expect(rows).toEqual([{ process: alive.process, operation: 'op-alive' }]);
    await taken.release();
  });

  it('are not released by an operation that does not hold them', async () => {
    const a = await configProcess();
    await a.acquire('db4', 'op-x', 'holder');
    await a.release('db4', 'op-y');
    expect(await db.dataSource.query("SELECT operation FROM locks WHERE resource = 'db4'")).toEqual([{ operation: 'op-x' }]);
  });
});
