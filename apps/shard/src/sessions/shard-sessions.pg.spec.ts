import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type InternalClients, MetricsService } from '@tessera/platform';
import type { RefreshSessionsRequest } from '@tessera/protocol';
import { type TestDatabase, createTestDatabase } from '../../../../test/pg/test-database.js';
import type { ShardIdentityService } from '../identity/shard-identity.service.js';
import type { ShardSettings } from '../shard.settings.js';
import { ShardSessions } from './shard-sessions.service.js';
import { SessionCatalog } from './session-catalog.js';
import { SessionRecords } from './session-records.service.js';
import { TransactionsStore } from './transactions.store.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('shard');
});
afterAll(async () => db?.drop());

/** A ShardSessions over the test database, its config server a fake holding `live` sessions. */
function shardSessions(live: Set<string>, refreshes: RefreshSessionsRequest[] = []) {
  const config = {
    refreshSessions: async (request: RefreshSessionsRequest) => {
      refreshes.push(request);
      return { expired: [], timeoutMinutes: 30 };
    },
    liveSessions: async ({ ids }: { ids: string[] }) => ({ live: ids.filter((id) => live.has(id)) }),
  };
  const identity = { get: async () => ({ configUrl: 'http://config.test:7080' }) } as unknown as ShardIdentityService;
  const clients = { config: () => config } as unknown as InternalClients;
  const settings = { TESSERA_NODE_NAME: 'shard0' } as ShardSettings;
  const logger = pino({ level: 'silent' });
  const records = new SessionRecords(db.dataSource, new TransactionsStore(), new SessionCatalog(), logger);
  return new ShardSessions(records, identity, clients, settings, logger, new MetricsService());
}

/** A session with a record and a statement, last written `minutesAgo`. */
async function recordSession(minutesAgo: number): Promise<string> {
  const lsid = randomUUID();
  await db.dataSource.query(
    `INSERT INTO txn_records (lsid, txn_number, last_write_at, collection_uuid, stmt_ids, shard_keys, results)
     VALUES ($1, 1, now() - make_interval(mins => $2), $3, '{0}', '{NULL}', '{"{}"}')`,
    [lsid, minutesAgo, randomUUID()],
  );
  return lsid;
}

async function recorded(lsid: string): Promise<{ records: number; statements: number }> {
  const [r] = await db.dataSource.query(
    `SELECT count(*)::int AS records, coalesce(sum(cardinality(stmt_ids)), 0)::int AS statements FROM txn_records WHERE lsid = $1`,
    [lsid],
  );
  return r as { records: number; statements: number };
}

describe('ShardSessions reap', () => {
  it('removes the stale records of sessions the sessions table no longer holds, and reports them at the next refresh', async () => {
    const expired = await recordSession(45);
    const stillLive = await recordSession(45);
    const recent = await recordSession(1);
    const refreshes: RefreshSessionsRequest[] = [];
    const sessions = shardSessions(new Set([stillLive]), refreshes);

    expect(await sessions.reap()).toEqual([expired]);
    expect(await recorded(expired)).toEqual({ records: 0, statements: 0 });
    expect(await recorded(stillLive)).toEqual({ records: 1, statements: 1 });
    expect(await recorded(recent)).toEqual({ records: 1, statements: 1 });

    await sessions.refreshAndReap();
    expect(refreshes[0]).toMatchObject({ node: 'shard0', role: 'shard', reaped: [expired] });
  });

  it('keeps a session written again while the reaper asked the config server', async () => {
    const lsid = await recordSession(45);
    const store = new TransactionsStore();
    const cutoff = new Date(Date.now() - 30 * 60_000);
    await db.dataSource.query('UPDATE txn_records SET last_write_at = now() WHERE lsid = $1', [lsid]);
    expect(await store.reapSessions(db.dataSource.manager, [lsid], cutoff)).toEqual([]);
    expect(await recorded(lsid)).toEqual({ records: 1, statements: 1 });
  });

  it('keeps a session whose latest write is still in the record log', async () => {
    const lsid = await recordSession(45);
    await new TransactionsStore().recordStatements(db.dataSource.manager, randomUUID(), [
      { lsid, txnNumber: 2, statements: [{ stmtId: 0, shardKey: undefined, result: { op: 'insert' } }] },
    ]);
    expect(await shardSessions(new Set()).reap()).not.toContain(lsid);
    expect(await recorded(lsid)).toEqual({ records: 1, statements: 1 });
  });
});
