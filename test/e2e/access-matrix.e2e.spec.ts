/**
 * Every public door, for every built-in role: each principal signs in (or not) and calls each
 * REST route of a router, each GraphQL query and mutation and each subscription of the control
 * plane, and subscribes to each socket.io room. The answer must be what the door's rule in
 * `access-rules.ts` decides for the principal's roles: 401 / UNAUTHORIZED without a user, 403
 * Unauthorized / FORBIDDEN without a privilege (naming nothing but the action and the database
 * the call named), and anything else when allowed. The matrix checks the wiring of every door; a
 * table written by hand checks what the rules decide for the doors users meet first.
 */
import { randomUUID } from 'node:crypto';
import { connect } from 'node:net';
import fc from 'fast-check';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  type GraphQLArgument,
  type GraphQLField,
  type GraphQLInputType,
  buildSchema,
  getNamedType,
  isEnumType,
  isInputObjectType,
  isListType,
  isNonNullType,
  isScalarType,
  isCompositeType,
} from 'graphql';
import { createClient } from 'graphql-ws';
import { io } from 'socket.io-client';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RoleGrant } from '@tessera/core';
import { type AccessRule, GRAPHQL_ACCESS_RULES, REST_ACCESS_RULES, SOCKET_ACCESS_RULES, missingPrivilege } from '@tessera/protocol';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';
import { FAST_CONFIG_ENV, eventually, waitForLeader } from './helpers.js';
import { repoRoot, rootApi, startTestCluster } from './test-cluster.js';

interface Caller {
  readonly name: string;
  /** `Bearer <key>`, or undefined for no `Authorization` header. */
  readonly authorization: string | undefined;
  readonly roles: readonly RoleGrant[];
}

type Verdict = 'allowed' | 'unauthenticated' | 'refused';

let cluster: LocalCluster;
let dispose: () => Promise<void>;
const callers: Caller[] = [];

/** The roles each principal is made with (root signs in with the cluster's root key). */
const PRINCIPALS: ReadonlyArray<{ name: string; roles: RoleGrant[] }> = [
  { name: 'nobody', roles: [] },
  { name: 'reader', roles: [{ role: 'read', db: 'shop' }] },
  { name: 'writer', roles: [{ role: 'readWrite', db: 'shop' }] },
  { name: 'shopAdmin', roles: [{ role: 'dbAdmin', db: 'shop' }] },
  { name: 'userAdmin', roles: [{ role: 'userAdmin', db: 'admin' }] },
  { name: 'monitor', roles: [{ role: 'clusterMonitor', db: 'admin' }] },
  { name: 'manager', roles: [{ role: 'clusterManager', db: 'admin' }] },
  { name: 'operator', roles: [{ role: 'clusterAdmin', db: 'admin' }] },
];

/** What a door's rule decides for `caller` on `input`. */
function expected(rule: AccessRule, caller: Caller, input: { params: Record<string, string>; body: unknown }): Verdict {
  if (rule.kind === 'public') return 'allowed';
  if (caller.authorization === undefined) return 'unauthenticated';
  if (rule.kind === 'signedIn') return 'allowed';
  return missingPrivilege(rule, input, caller.roles) === undefined ? 'allowed' : 'refused';
}

async function graphql(authorization: string | undefined, query: string, variables: Record<string, unknown> = {}) {
  const response = await fetch(`${cluster.node('config').url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(authorization === undefined ? {} : { authorization }) },
    body: JSON.stringify({ query, variables }),
  });
  return (await response.json()) as { data?: Record<string, unknown>; errors?: Array<{ message: string; extensions?: { code?: string } }> };
}

/** A refusal's message names the action and the database (or the cluster) the call named, nothing else. */
const REFUSAL = /^not authorized on (the cluster|shop|admin|config) to execute \w+$/;

// ---------------------------------------------------------------------------------------------
// REST: one call for each route, on the `shop` database.

const SESSION = () => ({ id: { $uuid: randomUUID() } });
const REST_CALLS: Record<string, { path: string; body?: unknown; params?: Record<string, string> }> = {
  'GET /v1/hello': { path: '/v1/hello' },
  'GET /v1/openapi.json': { path: '/v1/openapi.json' },
  'GET /v1/docs': { path: '/v1/docs' },
  'GET /v1/admin/currentOp': { path: '/v1/admin/currentOp' },
  'POST /v1/{db}/{coll}/insert': { path: '/v1/shop/orders/insert', body: { documents: [{ _id: 'matrix' }] } },
  'POST /v1/{db}/{coll}/find': { path: '/v1/shop/orders/find', body: { filter: {} } },
  'POST /v1/{db}/{coll}/update': { path: '/v1/shop/orders/update', body: { updates: [{ q: { _id: 'matrix' }, u: { $set: { a: 1 } } }] } },
  'POST /v1/{db}/{coll}/delete': { path: '/v1/shop/orders/delete', body: { deletes: [{ q: { _id: 'none' }, limit: 1 }] } },
  'POST /v1/{db}/{coll}/findAndModify': {
    path: '/v1/shop/orders/findAndModify',
    body: { query: { _id: 'none' }, update: { $set: { b: 1 } } },
  },
  'POST /v1/{db}/{coll}/aggregate': {
    path: '/v1/shop/orders/aggregate',
    body: { pipeline: [{ $lookup: { from: 'customers', localField: 'a', foreignField: 'b', as: 'c' } }], cursor: {} },
  },
  'POST /v1/{db}/{coll}/count': { path: '/v1/shop/orders/count', body: { filter: {} } },
  'POST /v1/{db}/{coll}/distinct': { path: '/v1/shop/orders/distinct', body: { key: 'a' } },
  'POST /v1/{db}/{coll}/indexes': { path: '/v1/shop/orders/indexes', body: { indexes: [{ key: { a: 1 }, name: 'a_1' }] } },
  'GET /v1/{db}/{coll}/indexes': { path: '/v1/shop/orders/indexes' },
  'DELETE /v1/{db}/{coll}/indexes/{name}': { path: '/v1/shop/orders/indexes/none_1', params: { name: 'none_1' } },
  'POST /v1/{db}/{coll}/documents': { path: '/v1/shop/orders/documents', body: { _id: 'doc', a: 1 } },
  'GET /v1/{db}/{coll}/documents/{id}': { path: '/v1/shop/orders/documents/doc', params: { id: 'doc' } },
  'PUT /v1/{db}/{coll}/documents/{id}': { path: '/v1/shop/orders/documents/doc', params: { id: 'doc' }, body: { a: 2 } },
  'PATCH /v1/{db}/{coll}/documents/{id}': { path: '/v1/shop/orders/documents/doc', params: { id: 'doc' }, body: { $set: { a: 3 } } },
  'DELETE /v1/{db}/{coll}/documents/{id}': { path: '/v1/shop/orders/documents/none', params: { id: 'none' } },
  'POST /v1/cursors/{id}/next': { path: '/v1/cursors/123/next', params: { id: '123' }, body: {} },
  'DELETE /v1/cursors/{id}': { path: '/v1/cursors/123', params: { id: '123' } },
  'POST /v1/admin/renameCollection': { path: '/v1/admin/renameCollection', body: { renameCollection: 'shop.tmp_a', to: 'shop.tmp_b' } },
  'POST /v1/admin/bulkWrite': {
    path: '/v1/admin/bulkWrite',
    body: { ops: [{ insert: 0, document: { _id: 'bulk' } }], nsInfo: [{ ns: 'shop.orders' }] },
  },
  'POST /v1/admin/startSession': { path: '/v1/admin/startSession', body: {} },
  'POST /v1/admin/refreshSessions': { path: '/v1/admin/refreshSessions', body: { ids: [SESSION()] } },
  'POST /v1/admin/endSessions': { path: '/v1/admin/endSessions', body: { ids: [SESSION()] } },
  'POST /v1/admin/killSessions': { path: '/v1/admin/killSessions', body: { ids: [SESSION()] } },
  'POST /v1/admin/commitTransaction': { path: '/v1/admin/commitTransaction', body: { lsid: SESSION(), txnNumber: 1, autocommit: false } },
  'POST /v1/admin/abortTransaction': { path: '/v1/admin/abortTransaction', body: { lsid: SESSION(), txnNumber: 1, autocommit: false } },
};

/** A call to the router as `caller`: the status, and the body when it is JSON (`/v1/docs` is a page). */
async function send(
  caller: Caller,
  method: string,
  path: string,
  body: unknown,
): Promise<{ status: number; json: Record<string, unknown> }> {
  const response = await fetch(`${cluster.routerUrls[0]}${path}`, {
    method,
    headers: {
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...(caller.authorization === undefined ? {} : { authorization: caller.authorization }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = response.headers.get('content-type')?.includes('json') ? ((await response.json()) as Record<string, unknown>) : {};
  return { status: response.status, json };
}

/** The verdict a router's answer gives. */
function restVerdict(answer: { status: number; json: Record<string, unknown> }, door: string): Verdict {
  if (answer.status === 401) return 'unauthenticated';
  if (answer.status !== 403) return 'allowed';
  expect(answer.json, door).toMatchObject({ code: 13, codeName: 'Unauthorized' });
  expect(answer.json.errmsg, door).toMatch(REFUSAL);
  return 'refused';
}

// ---------------------------------------------------------------------------------------------
// GraphQL: each root field called with arguments made from the schema.

const schema = buildSchema(readFileSync(join(repoRoot, 'schema.graphql'), 'utf8'));

/** A value of `type` that parses: the namespace and database the matrix uses, else the simplest. */
function sample(type: GraphQLInputType, name: string): unknown {
  if (isNonNullType(type)) return sample(type.ofType, name);
  if (isListType(type)) return [sample(type.ofType, name)];
  if (isEnumType(type)) return type.getValues()[0]!.value;
  if (isInputObjectType(type)) {
    const fields = Object.values(type.getFields()).filter((f) => isNonNullType(f.type) && f.defaultValue === undefined);
    return Object.fromEntries(fields.map((f) => [f.name, sample(f.type, f.name)]));
  }
  if (isScalarType(type)) {
    if (name === 'ns') return 'shop.matrix';
    if (name === 'db') return 'shop';
    if (name === 'role') return 'read';
    switch (type.name) {
      case 'String':
      case 'ID':
        return `matrix_${name}`;
      case 'Int':
      case 'Float':
        return 1;
      case 'Boolean':
        return false;
      default:
        return {};
    }
  }
  throw new Error(`no sample for ${String(type)}`);
}

/** An operation calling `field` with its required arguments as variables, and those variables. */
function operationOf(kind: 'query' | 'mutation' | 'subscription', field: GraphQLField<unknown, unknown>) {
  const required = field.args.filter((a: GraphQLArgument) => isNonNullType(a.type) && a.defaultValue === undefined);
  const since = kind === 'subscription' ? field.args.filter((a) => a.name === 'since') : [];
  const args = [...required, ...since];
  const declared = args.map((a) => `$${a.name}: ${String(a.type)}`).join(', ');
  const passed = args.map((a) => `${a.name}: $${a.name}`).join(', ');
  const selection = isCompositeType(getNamedType(field.type)) ? ' { __typename }' : '';
  const query = `${kind}${declared === '' ? '' : ` (${declared})`} { ${field.name}${passed === '' ? '' : `(${passed})`}${selection} }`;
  const variables = Object.fromEntries(required.map((a) => [a.name, sample(a.type, a.name)]));
  if (since.length > 0) variables.since = 0;
  return { query, variables };
}

/** Every caller's call of every root field of `type` over HTTP, where its answer is not what the field's rule decides. */
async function graphqlMismatches(type: 'Query' | 'Mutation'): Promise<string[]> {
  const mismatches: string[] = [];
  for (const caller of callers) {
    for (const field of fieldsOf(type)) {
      const door = `${type}.${field.name}`;
      const { query, variables } = operationOf(type === 'Query' ? 'query' : 'mutation', field);
      const want = expected(GRAPHQL_ACCESS_RULES[door]!, caller, { params: {}, body: variables });
      const got = graphqlVerdict(await graphql(caller.authorization, query, variables), door);
      if (got !== want) mismatches.push(`${caller.name} ${door}: ${got}, the rule says ${want}`);
    }
  }
  return mismatches;
}

function graphqlVerdict(answer: Awaited<ReturnType<typeof graphql>>, door: string): Verdict {
  const error = answer.errors?.[0];
  if (error?.extensions?.code === 'UNAUTHORIZED') return 'unauthenticated';
  if (error?.extensions?.code !== 'FORBIDDEN') return 'allowed';
  expect(error.message, door).toMatch(REFUSAL);
  return 'refused';
}

const fieldsOf = (kind: 'Query' | 'Mutation' | 'Subscription') =>
  Object.values(
    schema.getType(kind) === undefined
      ? {}
      : (schema.getType(kind) as { getFields(): Record<string, GraphQLField<unknown, unknown>> }).getFields(),
  );

/**
 * A subscription's verdict: its first message. Each field is asked with `since: 0`, and the setup
 * made an event of each topic, so an allowed subscriber gets one at once and nothing is timed.
 */
function subscriptionVerdict(caller: Caller, query: string, variables: Record<string, unknown>, door: string): Promise<Verdict> {
  return new Promise((resolve, reject) => {
    const client = createClient({
      url: `${cluster.node('config').url.replace('http', 'ws')}/graphql`,
      webSocketImpl: WebSocket,
      connectionParams: caller.authorization === undefined ? {} : { authorization: caller.authorization },
      retryAttempts: 0,
      lazy: true,
    });
    const settle = (verdict: Verdict | Error) => {
      void client.dispose();
      if (verdict instanceof Error) reject(verdict);
      else resolve(verdict);
    };
    client.subscribe(
      { query, variables },
      {
        next: (value) => {
          const code = value.errors?.[0]?.extensions?.code;
          if (code === 'FORBIDDEN') expect(value.errors![0]!.message, door).toMatch(REFUSAL);
          settle(
            code === 'FORBIDDEN'
              ? 'refused'
              : code === 'UNAUTHORIZED'
                ? 'unauthenticated'
                : value.data
                  ? 'allowed'
                  : new Error(JSON.stringify(value)),
          );
        },
        error: (error: unknown) => {
          const errors = Array.isArray(error) ? (error as Array<{ message: string; extensions?: { code?: string } }>) : undefined;
          const code = errors?.[0]?.extensions?.code;
          // graphql-ws refuses a connection without a key before any operation (close code 4403).
          const closed = (error as { code?: number } | undefined)?.code === 4403;
          if (code === 'FORBIDDEN') settle('refused');
          else if (code === 'UNAUTHORIZED' || closed) settle('unauthenticated');
          else settle(new Error(`${door}: ${JSON.stringify(error)}`));
        },
        complete: () => undefined,
      },
    );
  });
}

async function socketVerdict(caller: Caller, room: string): Promise<Verdict> {
  const socket = io(`${cluster.node('config').url}/events`, {
    transports: ['websocket'],
    reconnection: false,
    auth: caller.authorization === undefined ? {} : { token: caller.authorization },
  });
  try {
    const connected = await new Promise<boolean>((resolve) => {
      socket.once('connect', () => resolve(true));
      socket.once('connect_error', () => resolve(false));
    });
    if (!connected) return 'unauthenticated';
    const ack = (await socket.timeout(10_000).emitWithAck('subscribe', { rooms: [room] })) as { ok: boolean; error?: { code: string } };
    if (ack.ok) return 'allowed';
    expect(ack.error?.code, room).toBe('FORBIDDEN');
    return 'refused';
  } finally {
    socket.disconnect();
  }
}

/**
 * Sends `head` (a request line and headers, CRLF-separated bytes) and `body` to 127.0.0.1:`port`
 * on a connection of its own, byte for byte as given, and answers the response's status code and
 * body (status 0 when the node closed the connection without an answer).
 */
function rawRequest(port: number, head: Buffer, body: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1' });
    let answer = '';
    socket.on('data', (chunk) => (answer += chunk.toString('utf8')));
    // A node that refuses a request's head may reset the connection before it has all of it.
    socket.on('error', (error: NodeJS.ErrnoException) =>
      error.code === 'ECONNRESET' || error.code === 'EPIPE' ? undefined : reject(error),
    );
    socket.on('close', () => {
      const status = /^HTTP\/1\.1 (\d{3})/.exec(answer);
      resolve({ status: status === null ? 0 : Number(status[1]), body: answer.slice(answer.indexOf('\r\n\r\n') + 4) });
    });
    const tail = `\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    socket.write(Buffer.concat([head, Buffer.from(tail)]));
  });
}

beforeAll(async () => {
  ({ cluster, dispose } = await startTestCluster({
    shards: 2,
    routers: 1,
    env: {
      ...FAST_CONFIG_ENV,
      TESSERA_BALANCER_ROUND_INTERVAL_MS: '500',
      TESSERA_LOGICAL_SESSION_REFRESH_MILLIS: '500',
      TESSERA_USER_CACHE_INVALIDATION_INTERVAL_SECS: '1',
    },
  }));
  await waitForLeader(cluster.configClient());
  const root = `Bearer ${cluster.rootKey}`;
  callers.push({ name: 'anonymous', authorization: undefined, roles: [] });
  for (const { name, roles } of PRINCIPALS) {
    const made = await graphql(
      root,
      'mutation ($name: String!, $roles: [RoleGrantInput!]!) { createUser(name: $name, roles: $roles) { name } }',
      {
        name,
        roles,
      },
    );
    expect(made.errors).toBeUndefined();
    const key = await graphql(root, 'mutation ($name: String!) { createApiKey(user: $name) { key } }', { name });
    callers.push({ name, authorization: `Bearer ${(key.data!.createApiKey as { key: string }).key}`, roles });
  }
  callers.push({ name: 'root', authorization: root, roles: [{ role: 'root', db: 'admin' }] });

  // An event of every topic, for the subscriptions' first message: placement and migrations (a
  // split and a move), a transaction's decision, a session the router reports; the balancer's
  // rounds and the shards' additions are there already.
  const api = rootApi(cluster);
  expect((await api.call('POST', '/v1/shop/orders/insert', { documents: [{ _id: 'a' }, { _id: 'z' }] })).status).toBe(200);
  const shard = await graphql(root, 'mutation { shardCollection(input: { ns: "shop.orders", key: { _id: 1 } }) { ns } }');
  expect(shard.errors).toBeUndefined();
  expect((await graphql(root, 'mutation { splitChunk(ns: "shop.orders", at: { _id: "m" }) { shard } }')).errors).toBeUndefined();
  const move = await graphql(
    root,
    'mutation { moveRange(ns: "shop.orders", min: { _id: "m" }, toShard: "shard1", wait: true) { state error } }',
  );
  expect(move.errors).toBeUndefined();
  expect(move.data!.moveRange).toMatchObject({ state: 'committed' });
  // A read first, so that the router knows the collection's new routing before the transaction.
  expect((await api.call('POST', '/v1/shop/orders/find', { filter: {} })).status).toBe(200);
  const txn = { lsid: SESSION(), txnNumber: 1, autocommit: false };
  const first = await api.call('POST', '/v1/shop/orders/update', {
    updates: [{ q: { _id: 'a' }, u: { $set: { t: 1 } } }],
    ...txn,
    startTransaction: true,
  });
  expect(first.json).toMatchObject({ modifiedCount: 1 });
  const second = await api.call('POST', '/v1/shop/orders/update', { updates: [{ q: { _id: 'z' }, u: { $set: { t: 1 } } }], ...txn });
  expect(second.json).toMatchObject({ modifiedCount: 1 });
  expect((await api.call('POST', '/v1/admin/commitTransaction', txn)).json).toMatchObject({ ok: 1 });
  await api.close();
}, 180_000);

afterAll(async () => {
  await dispose?.();
});

describe('every door, for every role', () => {
  it('has a sample call for every REST route, and answers each caller as the route rule decides', async () => {
    expect(Object.keys(REST_CALLS).sort()).toEqual(Object.keys(REST_ACCESS_RULES).sort());
    const mismatches: string[] = [];
    for (const caller of callers) {
      for (const [door, call] of Object.entries(REST_CALLS)) {
        const params = { db: 'shop', coll: 'orders', ...call.params };
        const want = expected(REST_ACCESS_RULES[door]!, caller, { params, body: call.body });
        const got = restVerdict(await send(caller, door.split(' ')[0]!, call.path, call.body), door);
        if (got !== want) mismatches.push(`${caller.name} ${door}: ${got}, the rule says ${want}`);
      }
    }
    expect(mismatches).toEqual([]);
  });

  it('answers each caller on every GraphQL query as the field rule decides', async () => {
    expect(await graphqlMismatches('Query')).toEqual([]);
  });

  it('answers each caller on every subscription and socket.io room as its rule decides', async () => {
    // root sees an event of every topic first: the setup made them (the session's once the router reports it).
    const mismatches: string[] = [];
    for (const caller of [...callers].reverse()) {
      for (const field of fieldsOf('Subscription')) {
        const door = `Subscription.${field.name}`;
        const { query, variables } = operationOf('subscription', field);
        const want = expected(GRAPHQL_ACCESS_RULES[door]!, caller, { params: {}, body: variables });
        const got = await (caller.name === 'root'
          ? eventually(() => subscriptionVerdict(caller, query, variables, door), `${door} to stream to root`, 30_000)
          : subscriptionVerdict(caller, query, variables, door));
        if (got !== want) mismatches.push(`${caller.name} ${door}: ${got}, the rule says ${want}`);
      }
      for (const room of Object.keys(SOCKET_ACCESS_RULES)) {
        const name = room === 'ns:' ? 'ns:shop.orders' : room;
        const want = expected(SOCKET_ACCESS_RULES[room]!, caller, { params: {}, body: { ns: 'shop.orders' } });
        const got = await socketVerdict(caller, name);
        if (got !== want) mismatches.push(`${caller.name} ${name}: ${got}, the rule says ${want}`);
      }
    }
    expect(mismatches).toEqual([]);
  }, 120_000);

  it('answers each caller on every mutation as the field rule decides', async () => {
    expect(await graphqlMismatches('Mutation')).toEqual([]);
  }, 120_000);

  it("decides the doors users meet first as MongoDB's built-in roles do", () => {
    // A = allowed, r = refused, for: find shop, insert shop, find bank, createIndex shop, currentOp,
    // Query.cluster, setBalancerState, createUser, Query.users, placement room.
    const table: Record<string, string> = {
      nobody: 'r r r r r r r r r r',
      reader: 'A r r r r r r r r r',
      writer: 'A A r A r r r r r r',
      shopAdmin: 'r r r A r r r r r r',
      userAdmin: 'r r r r r r r A A r',
      monitor: 'r r r r A A r r r A',
      manager: 'r r r r r A A r r A',
      operator: 'r r r r A A A r r A',
      root: 'A A A A A A A A A A',
    };
    const doors: Array<[AccessRule, Record<string, string>, unknown]> = [
      [REST_ACCESS_RULES['POST /v1/{db}/{coll}/find']!, { db: 'shop', coll: 'orders' }, {}],
      [REST_ACCESS_RULES['POST /v1/{db}/{coll}/insert']!, { db: 'shop', coll: 'orders' }, {}],
      [REST_ACCESS_RULES['POST /v1/{db}/{coll}/find']!, { db: 'bank', coll: 'accounts' }, {}],
      [REST_ACCESS_RULES['POST /v1/{db}/{coll}/indexes']!, { db: 'shop', coll: 'orders' }, {}],
      [REST_ACCESS_RULES['GET /v1/admin/currentOp']!, {}, undefined],
      [GRAPHQL_ACCESS_RULES['Query.cluster']!, {}, {}],
      [GRAPHQL_ACCESS_RULES['Mutation.setBalancerState']!, {}, {}],
      [GRAPHQL_ACCESS_RULES['Mutation.createUser']!, {}, {}],
      [GRAPHQL_ACCESS_RULES['Query.users']!, {}, {}],
      [SOCKET_ACCESS_RULES['topic:placement']!, {}, {}],
    ];
    for (const caller of callers.filter((c) => c.name !== 'anonymous')) {
      const row = doors.map(([rule, params, body]) => (expected(rule, caller, { params, body }) === 'allowed' ? 'A' : 'r')).join(' ');
      expect(row, caller.name).toBe(table[caller.name]);
    }
  });
});

describe('the sign-in paths of running nodes, fuzzed', () => {
  it('never grant access to a made-up Authorization header, and never fall over (seed printed on failure)', async () => {
    const seed = Date.now();
    const basic = (bytes: Uint8Array) => Buffer.concat([Buffer.from('Basic '), Buffer.from(Buffer.from(bytes).toString('base64'))]);
    const header = fc.oneof(
      fc.uint8Array({ maxLength: 300 }).map((bytes) => Buffer.from(bytes)),
      fc.string({ unit: 'grapheme', maxLength: 200 }).map((s) => Buffer.from(s, 'utf8')),
      fc.string({ maxLength: 200 }).map((s) => Buffer.from(`Bearer ${s}`, 'utf8')),
      fc.string({ maxLength: 60 }).map((s) => Buffer.from(`Bearer tsk_${s}`, 'utf8')),
      fc.uint8Array({ maxLength: 300 }).map(basic),
      fc.string({ unit: 'binary', maxLength: 100 }).map((s) => basic(Buffer.from(`root:${s}`, 'utf8'))),
      fc.nat({ max: 70_000 }).map((n) => Buffer.from(`Bearer ${'k'.repeat(n)}`)),
    );
    // A header's bytes end at a line break: one without CR or LF stays one header.
    const headers = fc.sample(header, { numRuns: 240, seed }).map((bytes) => Buffer.from(bytes.filter((b) => b !== 0x0d && b !== 0x0a)));
    const router = Number(new URL(cluster.routerUrls[0]!).port);
    const config = Number(new URL(cluster.node('config').url).port);
    const whoAmI = JSON.stringify({ query: '{ whoAmI { user } }' });
    const answers: Array<{ door: string; status: number; body: string; header: string }> = [];
    // In parallel: from the fourth failure, each refusal from one address is slowed (up to 4 s).
    for (let i = 0; i < headers.length; i += 60) {
      await Promise.all(
        headers.slice(i, i + 60).flatMap((bytes) => {
          const field = Buffer.concat([Buffer.from('authorization: '), bytes]);
          const header = `${bytes.length} bytes: ${bytes.toString('latin1').slice(0, 80)}`;
          const find = Buffer.concat([Buffer.from('POST /v1/shop/orders/find HTTP/1.1\r\nhost: 127.0.0.1\r\n'), field]);
          const graphqlHead = Buffer.concat([Buffer.from('POST /graphql HTTP/1.1\r\nhost: 127.0.0.1\r\n'), field]);
          return [
            rawRequest(router, find, '{"filter":{}}').then((answer) => answers.push({ door: 'router find', header, ...answer })),
            rawRequest(config, graphqlHead, whoAmI).then((answer) => answers.push({ door: 'config whoAmI', header, ...answer })),
          ];
        }),
      );
    }
    // The router refuses with 401 (429 when password checks are shed; 400 or 431 when the HTTP
    // parser refuses the header first, or no answer at all past its 16 KiB of headers). The
    // control plane answers GraphQL's 200 with an error and no user, or as the parser does.
    const parserRefusal = (a: { status: number; header: string }) =>
      [400, 431].includes(a.status) || (a.status === 0 && Number(a.header.split(' ')[0]) > 16 * 1024);
    const granted = answers.filter((a) =>
      a.door === 'router find'
        ? !([401, 429].includes(a.status) || parserRefusal(a))
        : !((a.status === 200 && /"errors"/.test(a.body) && !/"whoAmI":\{/.test(a.body)) || parserRefusal(a)),
    );
    expect(
      granted.map((a) => ({ ...a, body: a.body.slice(0, 200) })),
      `seed ${seed}`,
    ).toEqual([]);
    // Both nodes still serve, and the root key still signs in.
    expect((await fetch(`${cluster.routerUrls[0]}/v1/hello`)).status).toBe(200);
    const root = rootApi(cluster);
    expect((await root.call('POST', '/v1/shop/orders/count', { filter: {} })).status).toBe(200);
    await root.close();
    expect((await graphql(`Bearer ${cluster.rootKey}`, '{ whoAmI { user } }')).data).toEqual({ whoAmI: { user: 'root' } });
  }, 120_000);
});
