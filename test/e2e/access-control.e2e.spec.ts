/**
 * The router's public API with authorization enabled, as it is by default: every route but hello and the API's
 * description needs a verified user with the privileges its access rule names. The users are the
 * environment's: root (TESSERA_ROOT_KEY), admin (clusterAdmin, dbAdminAnyDatabase and userAdminAnyDatabase) and
 * viewer (clusterMonitor). A changed root key is refused once the router reads the new users'
 * generation, without a restart of the router.
 */
import { randomUUID } from 'node:crypto';
import { io } from 'socket.io-client';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';
import { FAST_CONFIG_ENV, eventually, waitForLeader } from './helpers.js';
import { RouterApi } from './router-api.js';
import { startTestCluster } from './test-cluster.js';

let cluster: LocalCluster;
let dispose: () => Promise<void>;
let url: string;
const bearer = (key: string) => `Bearer ${key}`;

/** A control-plane operation with `key`: its data, or its first error's code and message. */
async function graphql<T = Record<string, unknown>>(key: string, query: string, variables: Record<string, unknown> = {}) {
  const response = await fetch(`${cluster.node('config').url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: bearer(key) },
    body: JSON.stringify({ query, variables }),
  });
  const answer = (await response.json()) as { data?: T; errors?: Array<{ message: string; extensions?: { code?: string } }> };
  return { data: answer.data, error: answer.errors?.[0] && { code: answer.errors[0].extensions?.code, message: answer.errors[0].message } };
}

/** A router client of a new user with `roles`, signed in with an API key made for it. */
async function userApi(name: string, roles: Array<{ role: string; db: string }>): Promise<RouterApi> {
  const created = await graphql(
    cluster.rootKey,
    'mutation ($name: String!, $roles: [RoleGrantInput!]!) { createUser(name: $name, roles: $roles) { name } }',
    {
      name,
      roles,
    },
  );
  expect(created.error).toBeUndefined();
  const made = await graphql<{ createApiKey: { key: string } }>(
    cluster.rootKey,
    'mutation ($name: String!) { createApiKey(user: $name) { key } }',
    { name },
  );
  return new RouterApi(url, bearer(made.data!.createApiKey.key));
}

beforeAll(async () => {
  ({ cluster, dispose } = await startTestCluster({
    shards: 1,
    routers: 2,
    // No TESSERA_AUTHORIZATION: the routers check their callers by default.
    env: { ...FAST_CONFIG_ENV, TESSERA_USER_CACHE_INVALIDATION_INTERVAL_SECS: '1' },
    // router1 limits each key to 5 requests a second.
    nodeEnv: { router1: { TESSERA_RATE_LIMIT_PER_SECOND: '5' } },
  }));
  await waitForLeader(cluster.configClient());
  url = cluster.routerUrls[0]!;
}, 120_000);

afterAll(async () => {
  await dispose?.();
});

describe('the router, which checks its callers by default', () => {
  it('answers hello and its API description to anyone, and 401 Unauthorized to a call without a user', async () => {
    const anonymous = new RouterApi(url);
    expect((await anonymous.call('GET', '/v1/hello')).status).toBe(200);
    expect((await anonymous.call('GET', '/v1/openapi.json')).status).toBe(200);
    const refused = await anonymous.call('POST', '/v1/shop/orders/insert', { documents: [{ _id: 1 }] });
    expect(refused.status).toBe(401);
    expect(refused.json).toMatchObject({ code: 13, codeName: 'Unauthorized' });
    await anonymous.close();
  });

  it('answers 401 AuthenticationFailed to a wrong key, a wrong password and a malformed header alike', async () => {
    for (const header of [
      bearer('tsk_000000000000_wrong'),
      `Basic ${Buffer.from('root:guess-guess-guess').toString('base64')}`,
      'Bearer',
      'Negotiate x',
    ]) {
      const api = new RouterApi(url, header);
      const answer = await api.call('POST', '/v1/shop/orders/find', { filter: {} });
      expect(answer.status, header).toBe(401);
      expect(answer.json, header).toMatchObject({ code: 18, codeName: 'AuthenticationFailed', errmsg: 'Authentication failed.' });
      await api.close();
    }
  });

  it('lets root read and write, and refuses the viewer and admin writes with 403 naming nothing but the call', async () => {
    const root = new RouterApi(url, bearer(cluster.rootKey));
    const written = await root.call('POST', '/v1/shop/orders/insert', { documents: [{ _id: 1, total: 5 }] });
    expect(written.status, JSON.stringify(written.json)).toBe(200);
    expect(await root.findAll('shop.orders', { filter: {} })).toEqual([{ _id: 1, total: 5 }]);
    for (const [who, key] of [
      ['viewer', cluster.controlPlaneTokens.viewer],
      ['admin', cluster.controlPlaneTokens.admin],
    ] as const) {
      const api = new RouterApi(url, bearer(key));
      for (const [path, body] of [
        ['/v1/shop/orders/insert', { documents: [{ _id: 2 }] }],
        ['/v1/shop/orders/find', { filter: {} }],
        ['/v1/shop/secret/find', { filter: {} }],
      ] as const) {
        const answer = await api.call('POST', path, body);
        expect(answer.status, `${who} ${path}`).toBe(403);
        expect(answer.json, `${who} ${path}`).toMatchObject({ code: 13, codeName: 'Unauthorized' });
        expect(JSON.stringify(answer.json)).not.toMatch(/total|orders|secret/);
      }
      // clusterMonitor and clusterAdmin may see the operations in progress (inprog).
      expect((await api.call('GET', '/v1/admin/currentOp')).status, who).toBe(200);
      await api.close();
    }
    await root.close();
  });

  it('checks every namespace a bulkWrite names', async () => {
    const root = new RouterApi(url, bearer(cluster.rootKey));
    const bulk = { nsInfo: [{ ns: 'shop.orders' }], ops: [{ insert: 0, document: { _id: 3 } }] };
    expect((await root.call('POST', '/v1/admin/bulkWrite', bulk)).status).toBe(200);
    const viewer = new RouterApi(url, bearer(cluster.controlPlaneTokens.viewer));
    expect((await viewer.call('POST', '/v1/admin/bulkWrite', bulk)).status).toBe(403);
    await Promise.all([root.close(), viewer.close()]);
  });

  it('gives a user made in the control plane what its roles allow, nothing once it is dropped, and audits it all', async () => {
    const root = cluster.rootKey;
    const viewer = cluster.controlPlaneTokens.viewer;
    const create =
      'mutation ($name: String!) { createUser(name: $name, roles: [{ role: "readWrite", db: "shop" }]) { name roles { role db } } }';
    expect((await graphql(viewer, create, { name: 'shopper' })).error).toMatchObject({ code: 'FORBIDDEN' });
    expect((await graphql(root, create, { name: 'shopper' })).data).toEqual({
      createUser: { name: 'shopper', roles: [{ role: 'readWrite', db: 'shop' }] },
    });
    const made = await graphql<{ createApiKey: { id: string; key: string } }>(
      root,
      'mutation { createApiKey(user: "shopper", description: "e2e") { id key } }',
    );
    const key = made.data!.createApiKey.key;
    const who = await graphql<{ whoAmI: { user: string; allowed: string[] } }>(key, '{ whoAmI { user allowed } }');
    expect(who.data?.whoAmI.user).toBe('shopper');
    expect(who.data?.whoAmI.allowed).toEqual(['Query.whoAmI']);
    const shopper = new RouterApi(url, bearer(key));
    expect((await shopper.call('POST', '/v1/shop/orders/insert', { documents: [{ _id: 'by-shopper' }] })).status).toBe(200);
    expect((await shopper.call('POST', '/v1/bank/accounts/find', { filter: {} })).status).toBe(403);
    expect((await graphql(key, '{ cluster { lastEventSeq } }')).error).toMatchObject({ code: 'FORBIDDEN' });
    // socket.io: the shopper may connect, but not watch the cluster's rooms; the viewer may.
    for (const [token, ok] of [
      [key, false],
      [viewer, true],
    ] as const) {
      const socket = io(`${cluster.node('config').url}/events`, { transports: ['websocket'], reconnection: false, auth: { token } });
      const ack = (await socket.timeout(10_000).emitWithAck('subscribe', { rooms: ['topic:placement'] })) as {
        ok: boolean;
        error?: { code: string };
      };
      expect(ack.ok, token === key ? 'shopper' : 'viewer').toBe(ok);
      if (!ok) expect(ack.error?.code).toBe('FORBIDDEN');
      socket.disconnect();
    }
    expect((await graphql(root, 'mutation { dropUser(name: "shopper") }')).data).toEqual({ dropUser: true });
    await eventually(
      async () => ((await shopper.call('POST', '/v1/shop/orders/find', { filter: {} })).status === 401 ? true : undefined),
      'dropped user refused',
    );
    const setBalancer = 'mutation { setBalancerState(enabled: false) { mode } }';
    expect((await graphql(cluster.controlPlaneTokens.admin, setBalancer)).error).toBeUndefined();
    expect((await graphql(viewer, setBalancer)).error).toMatchObject({ code: 'FORBIDDEN' });
    await graphql(root, 'mutation { dropCollection(ns: "shop.nothing") { ns } }');
    const expected = [
      'root createUser shopper ok',
      'root createApiKey shopper ok',
      'root dropUser shopper ok',
      'null authenticate null refused',
      'admin setBalancerState null ok',
      'viewer setBalancerState null refused',
    ];
    // A mutation's entry is written once it has answered.
    await eventually(async () => {
      const audit = await graphql<{ auditLog: Array<{ user: string | null; action: string; target: string | null; outcome: string }> }>(
        viewer,
        '{ auditLog(first: 50) { user action target outcome } }',
      );
      const entries = audit.data!.auditLog.map((e) => `${e.user} ${e.action} ${e.target} ${e.outcome}`);
      const complete = expected.every((e) => entries.includes(e)) && entries.some((e) => e.startsWith('root dropCollection shop.nothing '));
      return complete ? true : undefined;
    }, 'the audit log to show the user changes, a refused sign-in and the control-plane mutations');
    await shopper.close();
  });

  it("keeps each user's sessions and cursors its own, as MongoDB's lsid.uid does", async () => {
    const [alice, bob] = await Promise.all(['alice', 'bob'].map((name) => userApi(name, [{ role: 'readWrite', db: 'shop' }])));
    expect((await alice!.call('POST', '/v1/shop/owned/insert', { documents: [{ _id: 1 }, { _id: 2 }, { _id: 3 }] })).status).toBe(200);
    const codeOf = (answer: { json: Record<string, unknown> }) => answer.json.codeName;

    // A cursor answers only the user who opened it; to another, it is not there.
    const found = await alice!.call('POST', '/v1/shop/owned/find', { filter: {}, batchSize: 1 });
    const cursor = (found.json.cursor as { id: string }).id;
    expect(codeOf(await bob!.call('POST', `/v1/cursors/${cursor}/next`, {}))).toBe('CursorNotFound');
    expect(codeOf(await bob!.call('DELETE', `/v1/cursors/${cursor}`))).toBe('CursorNotFound');
    expect((await alice!.call('POST', `/v1/cursors/${cursor}/next`, { batchSize: 1 })).status).toBe(200);

    // The same lsid sent by bob is bob's own session: alice's transaction and history are out of his reach.
    const lsid = { id: { $uuid: randomUUID() } };
    const txn = { lsid, txnNumber: 1, autocommit: false };
    expect((await alice!.call('POST', '/v1/shop/owned/insert', { documents: [{ _id: 't' }], ...txn, startTransaction: true })).status).toBe(
      200,
    );
    expect(codeOf(await bob!.call('POST', '/v1/admin/commitTransaction', txn))).toBe('NoSuchTransaction');
    expect((await alice!.call('POST', '/v1/admin/commitTransaction', txn)).json).toMatchObject({ ok: 1 });
    const retryable = { documents: [{ _id: 'r' }], lsid, txnNumber: 2 };
    expect((await alice!.call('POST', '/v1/shop/owned/insert', retryable)).json).toMatchObject({ insertedCount: 1 });
    // Not answered from alice's history: run as bob's own first write, it meets alice's document.
    const bobs = await bob!.call('POST', '/v1/shop/owned/insert', retryable);
    expect(bobs.json).toMatchObject({ insertedCount: 0, writeErrors: [{ code: 11000 }] });
    expect(bobs.json.retriedStmtIds).toBeUndefined();

    // bob's killSessions of that lsid kills his own session, not alice's cursor in hers.
    const inSession = await alice!.call('POST', '/v1/shop/owned/find', { filter: {}, batchSize: 1, lsid });
    const sessionCursor = (inSession.json.cursor as { id: string }).id;
    expect((await bob!.call('POST', '/v1/admin/killSessions', { ids: [lsid] })).status).toBe(200);
    expect((await alice!.call('POST', `/v1/cursors/${sessionCursor}/next`, { batchSize: 1 })).status).toBe(200);
    expect((await alice!.call('POST', '/v1/admin/killSessions', { ids: [lsid] })).status).toBe(200);
    expect(codeOf(await alice!.call('POST', `/v1/cursors/${sessionCursor}/next`, {}))).toBe('CursorNotFound');
    await Promise.all([alice!.close(), bob!.close()]);
  });

  it("streams the audit log on topic:audit, with a router's refusals and admin commands", async () => {
    const viewer = cluster.controlPlaneTokens.viewer;
    const socket = io(`${cluster.node('config').url}/events`, { transports: ['websocket'], reconnection: false, auth: { token: viewer } });
    const received: Array<{
      user: string | null;
      action: string;
      target: string | null;
      outcome: string;
      details: Record<string, unknown>;
    }> = [];
    socket.on('audit', (entry: (typeof received)[number]) => received.push(entry));
    expect(await socket.timeout(10_000).emitWithAck('subscribe', { rooms: ['topic:audit'] })).toMatchObject({ ok: true });
    const root = new RouterApi(url, bearer(cluster.rootKey));
    const watcher = new RouterApi(url, bearer(viewer));
    expect((await root.call('POST', '/v1/shop/audited/indexes', { indexes: [{ key: { a: 1 }, name: 'a_1' }] })).status).toBe(200);
    expect((await watcher.call('POST', '/v1/shop/audited/insert', { documents: [{ _id: 1 }] })).status).toBe(403);
    const wanted = [
      { user: 'root', action: 'createIndexes', target: 'shop.audited', outcome: 'ok' },
      {
        user: 'viewer',
        action: 'authCheck',
        target: 'shop.audited',
        outcome: 'refused',
        details: expect.objectContaining({ missing: 'insert' }),
      },
    ];
    await eventually(
      async () => (wanted.every((w) => received.some((r) => expect.objectContaining(w).asymmetricMatch(r))) ? true : undefined),
      'the router-side entries on topic:audit',
    );
    const logged = await graphql<{ auditLog: Array<{ action: string; target: string | null }> }>(
      viewer,
      '{ auditLog(first: 20) { action target } }',
    );
    expect(logged.data!.auditLog).toEqual(
      expect.arrayContaining([
        { action: 'createIndexes', target: 'shop.audited' },
        { action: 'authCheck', target: 'shop.audited' },
      ]),
    );
    socket.disconnect();
    await Promise.all([root.close(), watcher.close()]);
  });

  it("answers 429 with Retry-After past a key's rate limit, and counts each key on its own", async () => {
    const limited = cluster.routerUrls[1]!;
    const send = (key: string) =>
      request(`${limited}/v1/shop/orders/count`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: bearer(key) },
        body: JSON.stringify({ filter: {} }),
      });
    const answers = [];
    for (let i = 0; i < 12; i++) answers.push(await send(cluster.rootKey));
    const refused = answers.filter((a) => a.statusCode === 429);
    expect(refused.length).toBeGreaterThan(0);
    expect(Number(refused[0]!.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(await refused[0]!.body.json()).toMatchObject({
      codeName: 'TemporarilyUnavailable',
      details: { retryAfterSeconds: expect.any(Number) },
    });
    for (const answer of answers.filter((a) => a.statusCode !== 429)) {
      expect(answer.statusCode).toBe(200);
      await answer.body.dump();
    }
    for (const answer of refused.slice(1)) await answer.body.dump();
    // Another key on the same router has its own budget.
    const other = await send(cluster.controlPlaneTokens.admin);
    expect(other.statusCode).not.toBe(429);
    await other.body.dump();
  });

  it('refuses a root key the config server no longer knows, once the router reads the new generation', async () => {
    const old = new RouterApi(url, bearer(cluster.rootKey));
    expect((await old.call('POST', '/v1/shop/orders/find', { filter: {} })).status).toBe(200);
    const next = `tsk_root_${'n'.repeat(43)}`;
    cluster.node('config').env.TESSERA_ROOT_KEY = next;
    await cluster.restart('config');
    await waitForLeader(cluster.configClient());
    await eventually(
      async () => ((await old.call('POST', '/v1/shop/orders/find', { filter: {} })).status === 401 ? true : undefined),
      'old key refused',
    );
    const fresh = new RouterApi(url, bearer(next));
    expect((await fresh.call('POST', '/v1/shop/orders/find', { filter: {} })).status).toBe(200);
    await Promise.all([old.close(), fresh.close()]);
  });
});
