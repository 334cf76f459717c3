import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { RefreshSessionsRequest } from '@tessera/protocol';
import { type TestDatabase, createTestDatabase } from '../../../../test/pg/test-database.js';
import { errorOf } from '../../../../test/errors.js';
import { ChangelogService } from '../changelog/changelog.service.js';
import type { ConfigSettings } from '../config.settings.js';
import type { LeaderService } from '../leader/leader.service.js';
import { SessionExpiryService } from './session-expiry.service.js';
import { SessionsService } from './sessions.service.js';
import { SessionsStore } from './sessions.store.js';

let db: TestDatabase;
let sessions: SessionsService;
let expiry: SessionExpiryService;

const settings = {
  TESSERA_NODE_NAME: 'config-test',
  TESSERA_LOCAL_LOGICAL_SESSION_TIMEOUT_MINUTES: 30,
  TESSERA_LOGICAL_SESSION_REFRESH_MILLIS: 300_000,
} as ConfigSettings;

beforeAll(async () => {
  db = await createTestDatabase('config');
  const store = new SessionsStore(db.dataSource);
  const changelog = new ChangelogService(settings);
  sessions = new SessionsService(db.dataSource, store, changelog, settings);
  expiry = new SessionExpiryService(db.dataSource, store, changelog, {} as LeaderService, settings, {} as Logger);
});
afterAll(async () => db?.drop());
beforeEach(async () => {
  await db.dataSource.query('DELETE FROM sessions');
  await db.dataSource.query('DELETE FROM changelog');
});

const minutesAgo = (minutes: number) => new Date(Date.now() - minutes * 60_000).toISOString();

/** A refresh from `node` with nothing in it but what `request` says. */
function refresh(node: string, request: Partial<RefreshSessionsRequest>) {
  return sessions.refresh({ node, role: node.startsWith('shard') ? 'shard' : 'router', used: [], ended: [], cached: [], ...request });
}

async function lastUse(lsid: string): Promise<string | undefined> {
  const rows: Array<{ last_use: Date }> = await db.dataSource.query('SELECT last_use FROM sessions WHERE lsid = $1', [lsid]);
  return rows[0]?.last_use.toISOString();
}

async function changelog(what: string): Promise<Array<{ shard: string | null; details: Record<string, unknown> }>> {
  return db.dataSource.query('SELECT shard, details FROM changelog WHERE what = $1 ORDER BY id', [what]);
}

describe('the sessions refresh', () => {
  it('inserts the used sessions, records them as started once, and answers none of them expired', async () => {
    const [a, b] = [randomUUID(), randomUUID()];
    const used = [a, b].map((id) => ({ id, lastUse: minutesAgo(1) }));
    expect(await refresh('router0', { used, cached: [a, b] })).toEqual({ expired: [], timeoutMinutes: 30 });
    await refresh('router0', { used, cached: [a, b] });
    const started = await changelog('session.started');
    expect(started).toHaveLength(1);
    expect(started[0]!.details).toMatchObject({ node: 'router0', role: 'router', count: 2 });
    expect((started[0]!.details.lsids as string[]).sort()).toEqual([a, b].sort());
  });

  it('keeps the greatest last use whatever order the nodes report in', async () => {
    const id = randomUUID();
    const [older, newer] = [minutesAgo(5), minutesAgo(1)];
    await refresh('router0', { used: [{ id, lastUse: newer }] });
    await refresh('shard0', { used: [{ id, lastUse: older }] });
    expect(await lastUse(id)).toBe(newer);
    await refresh('router0', {
      used: [
        { id, lastUse: older },
        { id, lastUse: minutesAgo(0) },
      ],
    });
    expect(Date.parse((await lastUse(id))!)).toBeGreaterThan(Date.parse(newer));
  });

  it('records which nodes know a session, with their cursors and the highest txnNumber', async () => {
    const id = randomUUID();
    await refresh('router0', { used: [{ id, lastUse: minutesAgo(1), openCursors: 2 }], cached: [id] });
    await refresh('shard0', { used: [{ id, lastUse: minutesAgo(1), openCursors: 1, txnNumber: 7 }], cached: [id] });
    await refresh('shard0', { used: [{ id, lastUse: minutesAgo(0), openCursors: 0, txnNumber: 5 }], cached: [id] });
    const page = await sessions.page({ first: 10, lsid: id });
    expect(page.totalCount).toBe(1);
    expect(page.sessions[0]).toMatchObject({ lsid: id, openCursors: 2, highestTxnNumber: 7 });
    expect(page.sessions[0]!.nodes.map((n) => [n.node, n.role, n.openCursors, n.txnNumber])).toEqual([
      ['router0', 'router', 2, null],
      ['shard0', 'shard', 0, 7],
    ]);
  });

  it("forgets a node's part in the sessions it no longer caches", async () => {
    const [kept, dropped] = [randomUUID(), randomUUID()];
    const used = [kept, dropped].map((id) => ({ id, lastUse: minutesAgo(1) }));
    await refresh('router0', { used, cached: [kept, dropped] });
    await refresh('router0', { cached: [kept] });
    expect((await sessions.page({ first: 10, node: 'router0' })).sessions.map((s) => s.lsid)).toEqual([kept]);
    expect((await sessions.page({ first: 10, lsid: dropped })).sessions[0]!.nodes).toEqual([]);
  });

  it('removes ended sessions, records them, and answers them expired to the other nodes that cache them', async () => {
    const [ended, live] = [randomUUID(), randomUUID()];
    await refresh('shard0', { used: [ended, live].map((id) => ({ id, lastUse: minutesAgo(1) })), cached: [ended, live] });
    expect(await refresh('router0', { ended: [ended, randomUUID()] })).toMatchObject({ expired: [] });
    expect(await lastUse(ended)).toBeUndefined();
    const rows = await changelog('session.ended');
    expect(rows.map((r) => r.details)).toEqual([{ node: 'router0', role: 'router', lsids: [ended], count: 1 }]);
    expect((await refresh('shard0', { cached: [ended, live] })).expired).toEqual([ended]);
  });

  it('ends a session that a refresh both used and ended', async () => {
    const id = randomUUID();
    await refresh('router0', { used: [{ id, lastUse: minutesAgo(0) }], ended: [id] });
    expect(await lastUse(id)).toBeUndefined();
  });

  it("records a shard's reaped sessions and answered retries, a hundred sessions per row", async () => {
    const reaped = Array.from({ length: 150 }, () => randomUUID());
    const retried = randomUUID();
    await refresh('shard1', { reaped, retriesAnswered: [{ id: retried, count: 3 }] });
    const reapedRows = await changelog('session.reaped');
    expect(reapedRows.map((r) => [r.shard, r.details.count])).toEqual([
      ['shard1', 100],
      ['shard1', 50],
    ]);
    expect(reapedRows.flatMap((r) => r.details.lsids as string[])).toEqual(reaped);
    expect((await changelog('session.retryAnswered')).map((r) => r.details)).toEqual([
      { node: 'shard1', role: 'shard', sessions: [{ id: retried, count: 3 }], count: 1 },
    ]);
  });

  it('refuses a malformed refresh whole, applying nothing', async () => {
    const id = randomUUID();
    const error = await errorOf(refresh('router0', { used: [{ id, lastUse: minutesAgo(0) }], ended: ['not-a-uuid'] }));
    expect(error).toMatchObject({ code: 'BAD_VALUE' });
    expect(await lastUse(id)).toBeUndefined();
  });

  it('answers which sessions are live', async () => {
    const [live, gone] = [randomUUID(), randomUUID()];
    await refresh('shard0', { used: [{ id: live, lastUse: minutesAgo(0) }] });
    expect(await sessions.liveSessions({ ids: [live, gone, live] })).toEqual({ live: [live] });
  });

  it('pages sessions in lsid order and refuses a cursor that is not a session id', async () => {
    const ids = Array.from({ length: 5 }, () => randomUUID()).sort();
    await refresh('router0', { used: ids.map((id) => ({ id, lastUse: minutesAgo(0) })) });
    const first = await sessions.page({ first: 3 });
    expect(first).toMatchObject({ hasNextPage: true, totalCount: 5 });
    const second = await sessions.page({ first: 3, after: first.sessions.at(-1)!.lsid });
    expect([...first.sessions, ...second.sessions].map((s) => s.lsid)).toEqual(ids);
    expect(second.hasNextPage).toBe(false);
    expect(await errorOf(sessions.page({ first: 3, after: 'x' }))).toMatchObject({ code: 'BAD_VALUE' });
  });
});

describe('the sessions expiry', () => {
  it('deletes the sessions unused for the timeout, with their nodes, and records them expired', async () => {
    const [stale, fresh] = [randomUUID(), randomUUID()];
    await refresh('router0', {
      used: [
        { id: stale, lastUse: minutesAgo(31) },
        { id: fresh, lastUse: minutesAgo(29) },
      ],
    });
    expect(await expiry.expire()).toBe(1);
    expect(await lastUse(stale)).toBeUndefined();
    expect(await lastUse(fresh)).toBeDefined();
    const nodes: unknown[] = await db.dataSource.query('SELECT 1 FROM session_nodes WHERE lsid = $1', [stale]);
    expect(nodes).toEqual([]);
    expect((await changelog('session.expired')).map((r) => r.details)).toEqual([{ timeoutMinutes: 30, lsids: [stale], count: 1 }]);
    expect((await refresh('router0', { cached: [stale, fresh] })).expired).toEqual([stale]);
    expect(await expiry.expire()).toBe(0);
  });
});
