/**
 * The logical session lifecycle on real processes (issue 25), at short intervals: routers and
 * shards refresh their caches every 200 ms and sessions expire after 3 s unused. A session used
 * through the router reaches the sessions table with the nodes that know it; endSessions and
 * expiry kill its cursors on the router; a shard reaps the retry history of an expired session;
 * refreshSessions keeps a session alive.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clusterSessionId } from '@tessera/protocol';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';
import { FAST_CONFIG_ENV, eventually, waitForLeader } from './helpers.js';
import { RouterApi, onShardDatabase } from './router-api.js';
import { rootApi, startTestCluster } from './test-cluster.js';

const NS = 'life.items';
const PATH = '/v1/life/items';

let cluster: LocalCluster;
let dispose: () => Promise<void>;
let api: RouterApi;
let catalog: pg.Pool;

beforeAll(async () => {
  ({ cluster, dispose } = await startTestCluster({
    shards: 1,
    routers: 1,
    env: {
      ...FAST_CONFIG_ENV,
      TESSERA_LOGICAL_SESSION_REFRESH_MILLIS: '200',
      TESSERA_LOCAL_LOGICAL_SESSION_TIMEOUT_MINUTES: '0.05',
    },
  }));
  const config = cluster.configClient();
  await waitForLeader(config);
  api = rootApi(cluster);
  catalog = new pg.Pool({ connectionString: cluster.node('config').env.TESSERA_DATABASE_URL, max: 2 });
  await api.insertMany(
    NS,
    Array.from({ length: 200 }, (_, i) => ({ _id: i })),
  );
});

afterAll(async () => {
  await catalog?.end();
  await api?.close();
  await dispose?.();
});

async function startSession(): Promise<{ $uuid: string }> {
  const started = await api.call('POST', '/v1/admin/startSession');
  expect(started.json).toMatchObject({ id: { $uuid: expect.any(String) }, timeoutMinutes: 0.05, ok: 1 });
  return started.json.id as { $uuid: string };
}

/**
 * The session's id in the cluster, as the tables hold it: every client here signs in as root,
 * whose session the router makes of the id it sends (clusterSessionId).
 */
const inCluster = (id: string) => clusterSessionId(id, 'root');

/** The nodes the sessions table says know the session, or undefined when it holds no such session. */
async function knownBy(id: string): Promise<string[] | undefined> {
  const rows = await catalog.query<{ node: string | null }>(
    'SELECT n.node FROM sessions s LEFT JOIN session_nodes n USING (lsid) WHERE s.lsid = $1 ORDER BY n.node',
    [inCluster(id)],
  );
  if (rows.rows.length === 0) return undefined;
  return rows.rows.flatMap((r) => (r.node === null ? [] : [r.node]));
}

/** Opens a cursor of the session over the 200 documents, one per batch; answers its id. */
async function openCursor(id: { $uuid: string }): Promise<string> {
  const found = await api.call('POST', `${PATH}/find`, { filter: {}, batchSize: 1, lsid: { id } });
  const cursorId = (found.json.cursor as { id: string }).id;
  expect(cursorId).not.toBe('0');
  return cursorId;
}

const nextBatch = (cursorId: string) => api.call('POST', `/v1/cursors/${cursorId}/next`, { batchSize: 1 });

describe('logical sessions', () => {
  it('a session used by a retryable write reaches the sessions table, known by the router and the shard', async () => {
    const id = await startSession();
    const insert = await api.call('POST', `${PATH}/insert`, { documents: [{ _id: 'a' }], lsid: { id }, txnNumber: 1 });
    expect(insert.json).toMatchObject({ insertedCount: 1 });
    const nodes = await eventually(async () => {
      const known = await knownBy(id.$uuid);
      return known !== undefined && known.length === 2 ? known : undefined;
    }, 'the router and the shard to refresh the session');
    expect(nodes).toEqual(['router0', 'shard0']);
    const [row] = (
      await catalog.query<{ txn: string }>('SELECT max(txn_number)::text AS txn FROM session_nodes WHERE lsid = $1', [inCluster(id.$uuid)])
    ).rows;
    expect(row?.txn).toBe('1');
  });

  it('endSessions removes the session from the table and kills its cursors', async () => {
    const id = await startSession();
    const cursorId = await openCursor(id);
    await eventually(async () => ((await knownBy(id.$uuid)) === undefined ? undefined : true), 'the session in the table');
    expect((await nextBatch(cursorId)).status).toBe(200);
    expect((await api.call('POST', '/v1/admin/endSessions', { ids: [{ id }] })).json).toMatchObject({ ok: 1 });
    await eventually(async () => ((await knownBy(id.$uuid)) === undefined ? true : undefined), 'the ended session to leave the table');
    await eventually(async () => ((await nextBatch(cursorId)).json.codeName === 'CursorNotFound' ? true : undefined), 'its cursor killed');
  });

  it('an unused session expires: its cursor is killed and the shard reaps its retry history; refreshSessions keeps one alive', async () => {
    const abandoned = await startSession();
    const kept = await startSession();
    const insert = await api.call('POST', `${PATH}/insert`, { documents: [{ _id: 'b' }], lsid: { id: abandoned }, txnNumber: 1 });
    expect(insert.json).toMatchObject({ insertedCount: 1 });
    const cursorId = await openCursor(abandoned);
    const keptCursor = await openCursor(kept);
    const history = (id: string) =>
      onShardDatabase(
        cluster,
        'shard0',
        async (pool) => (await pool.query('SELECT 1 FROM txn_records WHERE lsid = $1', [inCluster(id)])).rowCount,
      );
    // The shard folds its record log into txn_records within a second.
    await eventually(async () => ((await history(abandoned.$uuid)) === 1 ? true : undefined), 'the shard to fold its record');

    const keepAlive = setInterval(() => void api.call('POST', '/v1/admin/refreshSessions', { ids: [{ id: kept }] }), 500);
    try {
      await eventually(async () => ((await knownBy(abandoned.$uuid)) === undefined ? true : undefined), 'the abandoned session to expire');
      // Each poll reads one document: a cursor killed, not exhausted, ends long before the 200th.
      let read = 0;
      await eventually(async () => {
        const next = await nextBatch(cursorId);
        if (next.json.codeName === 'CursorNotFound') return true;
        read += ((next.json.cursor as { nextBatch: unknown[] }).nextBatch ?? []).length;
        return undefined;
      }, "the abandoned session's cursor killed once the router learns of the expiry");
      expect(read).toBeLessThan(150);
      const expired = await catalog.query("SELECT 1 FROM changelog WHERE what = 'session.expired' AND details::text LIKE $1", [
        `%${inCluster(abandoned.$uuid)}%`,
      ]);
      expect(expired.rowCount).toBe(1);
      await eventually(async () => ((await history(abandoned.$uuid)) === 0 ? true : undefined), 'the shard to reap its history');
      expect(await knownBy(kept.$uuid)).toBeDefined();
      expect((await nextBatch(keptCursor)).status).toBe(200);
    } finally {
      clearInterval(keepAlive);
    }
  });
});
