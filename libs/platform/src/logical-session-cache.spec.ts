import { describe, expect, it } from 'vitest';
import type { RefreshSessionsRequest, RefreshSessionsResult } from '@tessera/protocol';
import { LogicalSessionCache } from './logical-session-cache.js';

const A = '00000000-0000-4000-8000-00000000000a';
const B = '00000000-0000-4000-8000-00000000000b';

/** A cache over a fake config server holding a sessions table; refreshes can be made to fail or stall. */
function setup() {
  const table = new Set<string>();
  const sent: RefreshSessionsRequest[] = [];
  const killed: string[][] = [];
  let clock = 1_000;
  let failNext = false;
  let stall: Promise<void> | undefined;
  const cache = new LogicalSessionCache({
    node: 'router0',
    role: 'router',
    now: () => clock,
    openCursors: (id) => (id === A ? 2 : 0),
    killCursors: async (ids) => void killed.push([...ids]),
    refresh: async (request): Promise<RefreshSessionsResult> => {
      sent.push(request);
      await stall;
      if (failNext) {
        failNext = false;
        throw new Error('config server unreachable');
      }
      for (const u of request.used) table.add(u.id);
      for (const id of request.ended) table.delete(id);
      return { expired: request.cached.filter((id) => !table.has(id)), timeoutMinutes: 7 };
    },
  });
  return {
    cache,
    table,
    sent,
    killed,
    tick: (ms: number) => void (clock += ms),
    failNextRefresh: () => void (failNext = true),
    stallRefresh: (until: Promise<void>) => void (stall = until),
  };
}

describe('LogicalSessionCache', () => {
  it('upserts the sessions used since the last refresh, with last use, open cursors and txnNumber', async () => {
    const { cache, sent } = setup();
    cache.vivify(A, 3);
    cache.vivify(A, 2);
    cache.vivify(B);
    await cache.refresh();
    expect(sent[0]).toMatchObject({
      node: 'router0',
      role: 'router',
      used: [
        { id: A, lastUse: new Date(1_000).toISOString(), openCursors: 2, txnNumber: 3 },
        { id: B, lastUse: new Date(1_000).toISOString(), openCursors: 0 },
      ],
      cached: [A, B],
    });
    expect(cache.timeoutMinutes).toBe(7);
    await cache.refresh();
    expect(sent[1]).toMatchObject({ used: [], cached: [A, B] });
  });

  it('removes ended sessions from the table at the next refresh and kills their cursors', async () => {
    const { cache, table, killed } = setup();
    cache.vivify(A);
    await cache.refresh();
    cache.end([A]);
    expect(cache.has(A)).toBe(false);
    expect(await cache.refresh()).toEqual([A]);
    expect(table.has(A)).toBe(false);
    expect(killed).toEqual([[A]]);
  });

  it('drops the cached sessions the table no longer holds (expired) and kills their cursors', async () => {
    const { cache, table, killed } = setup();
    cache.vivify(A);
    cache.vivify(B);
    await cache.refresh();
    table.delete(B);
    expect(await cache.refresh()).toEqual([B]);
    expect(cache.has(B)).toBe(false);
    expect(cache.has(A)).toBe(true);
    expect(killed).toEqual([[B]]);
  });

  it('keeps what a failed refresh was to send for the next one', async () => {
    const { cache, sent, failNextRefresh } = setup();
    cache.vivify(A);
    cache.vivify(B);
    cache.end([B]);
    cache.noteReaped([B]);
    cache.noteRetryAnswered(A);
    failNextRefresh();
    await expect(cache.refresh()).rejects.toThrow('unreachable');
    await cache.refresh();
    expect(sent[1]).toMatchObject({ used: [{ id: A }], ended: [B], reaped: [B], retriesAnswered: [{ id: A, count: 1 }] });
  });

  it('sends a use made during a refresh with the next one, and does not expire that session', async () => {
    const { cache, table, sent, tick, stallRefresh } = setup();
    cache.vivify(A);
    await cache.refresh();
    table.delete(A);
    let release!: () => void;
    stallRefresh(new Promise<void>((resolve) => (release = resolve)));
    const refreshing = cache.refresh();
    tick(500);
    cache.vivify(A);
    release();
    expect(await refreshing).toEqual([]);
    expect(cache.has(A)).toBe(true);
    await cache.refresh();
    expect(sent[2]).toMatchObject({ used: [{ id: A, lastUse: new Date(1_500).toISOString() }] });
  });

  it('a session used again after endSessions is no longer ended', async () => {
    const { cache, table } = setup();
    cache.vivify(A);
    cache.end([A]);
    cache.vivify(A);
    expect(await cache.refresh()).toEqual([]);
    expect(table.has(A)).toBe(true);
  });
});
