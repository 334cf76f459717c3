import { type Client, createClient } from 'graphql-ws';
import { type Socket, io } from 'socket.io-client';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';
import { FAST_CONFIG_ENV, eventually, waitForLeader } from './helpers.js';
import { startTestCluster } from './test-cluster.js';

const ADMIN = 'admin-token-for-the-e2e-test';
const VIEWER = 'viewer-token-for-the-e2e-test';
const NS = 'cp.orders';

let cluster: LocalCluster;
let dispose: () => Promise<void>;
const cleanups: Array<() => unknown> = [];

beforeAll(async () => {
  ({ cluster, dispose } = await startTestCluster({
    shards: 2,
    routers: 0,
    configs: 2,
    env: {
      ...FAST_CONFIG_ENV,
      TESSERA_ADMIN_TOKEN: ADMIN,
      TESSERA_VIEWER_TOKEN: VIEWER,
      TESSERA_GRAPHQL_MAX_DEPTH: '5',
      TESSERA_BALANCER_ROUND_INTERVAL_MS: '500',
      TESSERA_LOG_LEVEL: 'warn',
    },
    nodeEnv: { config1: { TESSERA_GRAPHQL_DEVELOPMENT: 'true' } },
  }));
  await waitForLeader(cluster.configClient());
});
afterAll(async () => {
  for (const cleanup of cleanups) await cleanup();
  await dispose?.();
});

interface GraphqlAnswer<T> {
  data?: T;
  errors?: Array<{ message: string; extensions?: { code?: string } }>;
}

/** A GraphQL operation over HTTP on config process `node`. */
async function graphql<T = Record<string, unknown>>(
  query: string,
  variables: Record<string, unknown> = {},
  token: string | null = VIEWER,
  node = 'config',
): Promise<GraphqlAnswer<T>> {
  const response = await fetch(`${cluster.node(node).url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify({ query, variables }),
  });
  return (await response.json()) as GraphqlAnswer<T>;
}

async function admin<T = Record<string, unknown>>(query: string, variables: Record<string, unknown> = {}): Promise<T> {
  const answer = await graphql<T>(query, variables, ADMIN);
  if (answer.errors) throw new Error(`GraphQL errors: ${JSON.stringify(answer.errors)}`);
  return answer.data as T;
}

async function lastEventSeq(node = 'config'): Promise<number> {
  const answer = await graphql<{ cluster: { lastEventSeq: number } }>('{ cluster { lastEventSeq } }', {}, VIEWER, node);
  return answer.data!.cluster.lastEventSeq;
}

interface Placement {
  seq: number;
  reason: string;
  ns: string;
  before: Array<{ min: unknown; max: unknown; shard: string; version: string }>;
  after: Array<{ min: unknown; max: unknown; shard: string; version: string }>;
}

const PLACEMENT = `subscription ($ns: String, $since: Float) {
  chunkPlacementChanged(ns: $ns, since: $since) { seq reason ns before { min max shard version } after { min max shard version } }
}`;

/** A graphql-ws subscription to chunkPlacementChanged on `node`, collecting what arrives. */
function subscribePlacement(node: string, since: number): { received: Placement[]; client: Client } {
  const client = createClient({
    url: `${cluster.node(node).url.replace('http', 'ws')}/graphql`,
    webSocketImpl: WebSocket,
    connectionParams: { authorization: `Bearer ${VIEWER}` },
    retryAttempts: 0,
  });
  const received: Placement[] = [];
  client.subscribe<{ chunkPlacementChanged: Placement }>(
    { query: PLACEMENT, variables: { ns: NS, since } },
    {
      next: (value) => {
        if (value.data) received.push(value.data.chunkPlacementChanged);
        else received.push({ error: value.errors } as never);
      },
      error: (error) => received.push({ error } as never),
      complete: () => undefined,
    },
  );
  cleanups.push(() => client.dispose());
  return { received, client };
}

/** A graphql-ws subscription on config1 to the single field `field` of `query`, collecting each value. */
function subscribed<T>(query: string, field: string): T[] {
  const client = createClient({
    url: `${cluster.node('config1').url.replace('http', 'ws')}/graphql`,
    webSocketImpl: WebSocket,
    connectionParams: { authorization: VIEWER },
    retryAttempts: 0,
  });
  cleanups.push(() => client.dispose());
  const received: T[] = [];
  client.subscribe<Record<string, T>>(
    { query },
    { next: (v) => received.push(v.data![field]!), error: () => undefined, complete: () => undefined },
  );
  return received;
}

/** A socket.io client on `/events` of `node`, in room `ns:<NS>`, collecting events. */
async function socketIn(
  node: string,
  since?: number,
): Promise<{ socket: Socket; received: Array<{ seq: number; kind: string; details: Record<string, unknown> }> }> {
  const socket = io(`${cluster.node(node).url}/events`, { auth: { token: VIEWER }, transports: ['websocket'], reconnection: false });
  cleanups.push(() => socket.disconnect());
  const received: Array<{ seq: number; kind: string; details: Record<string, unknown> }> = [];
  socket.on('event', (event: (typeof received)[number]) => received.push(event));
  const ack = await socket.timeout(10_000).emitWithAck('subscribe', { rooms: [`ns:${NS}`], ...(since === undefined ? {} : { since }) });
  expect(ack).toMatchObject({ ok: true, rooms: [`ns:${NS}`] });
  return { socket, received };
}

const SPLIT = 'mutation ($ns: String!, $at: JSON!) { splitChunk(ns: $ns, at: $at) { min max shard version } }';

describe('the GraphQL control plane', () => {
  it('refuses mutations to the viewer (clusterMonitor) as FORBIDDEN, and anything without a key as UNAUTHORIZED', async () => {
    const asViewer = await graphql('mutation { enableSharding(db: "cp") { name } }', {}, VIEWER);
    expect(asViewer.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    expect(asViewer.errors?.[0]?.message).toBe('not authorized on cp to execute enableSharding');
    const anonymous = await graphql('{ cluster { lastEventSeq } }', {}, null);
    expect(anonymous.errors?.[0]?.extensions?.code, JSON.stringify(anonymous)).toBe('UNAUTHORIZED');
    const listed = await graphql<{ cluster: { databases: unknown[] } }>('{ cluster { databases { name } } }');
    expect(listed.data?.cluster.databases).toEqual([]);
  });

  it('lists the ClusterTime signing keys to clusterAdmin (the admin token) and root only: ids and expiries, newest first, never the secret', async () => {
    const query = '{ clusterTimeKeys { keyId expiresAt } }';
    const listed = await eventually(async () => {
      const { clusterTimeKeys } = await admin<{ clusterTimeKeys: Array<{ keyId: string; expiresAt: string }> }>(query);
      return clusterTimeKeys.length >= 2 ? clusterTimeKeys : undefined;
    }, 'the leader to generate the signing key and the next');
    for (const key of listed) {
      expect(key.keyId).toMatch(/^\d+$/);
      expect(new Date(key.expiresAt).toISOString()).toBe(key.expiresAt);
    }
    expect(BigInt(listed[0]!.keyId)).toBeGreaterThan(BigInt(listed[1]!.keyId));
    expect(Date.parse(listed[0]!.expiresAt)).toBeGreaterThan(Date.parse(listed[1]!.expiresAt));

    const asViewer = await graphql(query, {}, VIEWER);
    const mutationAsViewer = await graphql('mutation { enableSharding(db: "cp") { name } }', {}, VIEWER);
    expect(asViewer.errors?.[0]?.extensions).toMatchObject({ code: 'FORBIDDEN', retryable: false });
    expect(asViewer.errors?.[0]?.extensions).toEqual(mutationAsViewer.errors?.[0]?.extensions);
    expect(asViewer.data).toBeNull();

    const secret = await graphql('{ clusterTimeKeys { keyId key } }', {}, ADMIN);
    expect(secret.errors?.[0]?.extensions?.code, JSON.stringify(secret)).toBe('BAD_VALUE');
    expect(secret.errors?.[0]?.message).toMatch(/Cannot query field "key"/);
  });

  it('refuses an over-deep query before running it', async () => {
    const deep = await graphql('{ cluster { databases { collections { chunks { nodes { shard } } } } } }');
    expect(deep.errors?.[0]?.extensions?.code, JSON.stringify(deep)).toBe('BAD_VALUE');
    expect(deep.errors?.[0]?.message).toMatch(/depth/i);
    expect(deep.data).toBeUndefined();
  });

  it('shows a split made by mutation on both streams of the other config process, with the chunks before and after', async () => {
    await admin('mutation { enableSharding(db: "cp") { name } }');
    const created = await admin<{ shardCollection: { ns: string; collectionVersion: string } }>(
      'mutation ($input: ShardCollectionInput!) { shardCollection(input: $input) { ns collectionVersion } }',
      { input: { ns: NS, key: { customer: 1 } } },
    );
    expect(created.shardCollection.ns).toBe(NS);
    // Both streams on config1, which commits nothing itself: it learns of config's commits through Postgres.
    const since = await lastEventSeq('config1');
    const gql = subscribePlacement('config1', since);
    const sio = await socketIn('config1', since);

    const split = await admin<{ splitChunk: Array<{ shard: string; version: string }> }>(SPLIT, { ns: NS, at: { customer: 100 } });
    expect(split.splitChunk).toHaveLength(2);

    const change = await eventually(async () => gql.received[0], 'the placement change on graphql-ws', 10_000);
    expect(change).toMatchObject({ reason: 'split', ns: NS });
    expect(change.before).toHaveLength(1);
    expect(change.before[0]).toMatchObject({ min: [{ $minKey: 1 }], max: [{ $maxKey: 1 }] });
    expect(change.after.map((c) => [c.min, c.max])).toEqual([
      [[{ $minKey: 1 }], [100]],
      [[100], [{ $maxKey: 1 }]],
    ]);
    expect(change.after.map((c) => c.version)).toEqual(split.splitChunk.map((c) => c.version));
    const event = await eventually(async () => sio.received.find((e) => e.kind === 'split'), 'the split on socket.io', 10_000);
    expect(event.seq).toBe(change.seq);
    expect(event.details.after).toHaveLength(2);
  });

  it('lets a client that reconnects with since catch up with nothing missed and nothing twice', async () => {
    const since = await lastEventSeq();
    const first = subscribePlacement('config', since);
    await admin(SPLIT, { ns: NS, at: { customer: 200 } });
    const seen = await eventually(async () => first.received[0], 'the first split', 10_000);
    await first.client.dispose();
    const sio = await socketIn('config');
    sio.socket.disconnect();

    // While both are away: two more splits.
    await admin(SPLIT, { ns: NS, at: { customer: 300 } });
    await admin(SPLIT, { ns: NS, at: { customer: 400 } });

    const resumed = subscribePlacement('config', seen.seq);
    const [a, b] = await eventually(async () => (resumed.received.length >= 2 ? resumed.received : undefined), 'the missed splits', 10_000);
    // The two splits, in order (other events, such as balancer rounds, may hold the seqs between).
    expect(seen.seq < a!.seq && a!.seq < b!.seq).toBe(true);
    expect([a!.after[1]!.min, b!.after[1]!.min]).toEqual([[300], [400]]);
    const again = await socketIn('config1', seen.seq);
    const replayed = await eventually(
      async () => (again.received.length >= 2 ? again.received : undefined),
      'the replay on socket.io',
      10_000,
    );
    expect(replayed.map((e) => e.seq)).toEqual([a!.seq, b!.seq]);
    // Nothing more arrives: the resumed streams are exactly the missed events.
    await new Promise((r) => setTimeout(r, 300));
    expect(resumed.received).toHaveLength(2);
    expect(again.received).toHaveLength(2);
  });

  it('answers queries with the catalog: chunks page by page, distribution, the chunk for a key, the changelog', async () => {
    const answer = await graphql<{
      collection: {
        chunks: { nodes: Array<{ shard: string }>; pageInfo: { hasNextPage: boolean; endCursor: string }; totalCount: number };
        distribution: Array<{ chunks: number }>;
      };
      chunkForKey: { min: unknown; max: unknown };
      changelog: { nodes: Array<{ kind: string }> };
      cluster: { shards: Array<{ name: string; statistics: { chunks: number } }> };
    }>(
      `{ collection(ns: "${NS}") { chunks(first: 2) { nodes { shard } pageInfo { hasNextPage endCursor } totalCount } distribution { chunks } }
         chunkForKey(ns: "${NS}", key: { customer: 250 }) { min max }
         changelog(filter: { ns: "${NS}", kinds: ["split"] }) { nodes { kind } }
         cluster { shards { name statistics { chunks } } } }`,
    );
    expect(answer.errors).toBeUndefined();
    const data = answer.data!;
    expect(data.collection.chunks.totalCount).toBe(5);
    expect(data.collection.chunks.pageInfo.hasNextPage).toBe(true);
    expect(data.collection.distribution.reduce((n, d) => n + d.chunks, 0)).toBe(5);
    expect(data.chunkForKey).toEqual({ min: [200], max: [300] });
    expect(data.changelog.nodes).toHaveLength(4);
    expect(data.cluster.shards.reduce((n, s) => n + s.statistics.chunks, 0)).toBe(5);
  });

  it('runs a moveRange issued by mutation: an operation id at once, progress and the end on migrationProgress, the move on both streams', async () => {
    const since = await lastEventSeq('config1');
    const gql = subscribePlacement('config1', since);
    const sio = await socketIn('config1', since);
    const progress = subscribed<{ kind: string; details: Record<string, unknown> }>(
      `subscription { migrationProgress(ns: "${NS}", since: ${since}) { kind details } }`,
      'migrationProgress',
    );
    const before = await graphql<{ chunkForKey: { shard: string; version: string } }>(
      `{ chunkForKey(ns: "${NS}", key: { customer: 250 }) { shard version } }`,
    );
    const donor = before.data!.chunkForKey.shard;
    const recipient = cluster.memberShards.map((s) => s.name).find((name) => name !== donor)!;

    const started = await admin<{ moveRange: { operationId: string; state: string } }>(
      'mutation ($ns: String!, $min: JSON!, $to: String!) { moveRange(ns: $ns, min: $min, toShard: $to) { operationId state } }',
      { ns: NS, min: { customer: 200 }, to: recipient },
    );
    expect(started.moveRange.state).toBe('running');
    const end = await eventually(
      async () => progress.find((e) => e.kind === 'moveRange.end' && e.details.operationId === started.moveRange.operationId),
      'the end of the migration on migrationProgress',
      30_000,
    );
    expect(end.details).toMatchObject({ outcome: 'committed', donor, recipient });
    expect(progress.some((e) => e.kind === 'moveChunk.phase')).toBe(true);

    const move = await eventually(async () => gql.received.find((c) => c.reason === 'moveChunk.commit'), 'the move on graphql-ws', 10_000);
    const moved = (chunks: Placement['after']) => chunks.find((c) => JSON.stringify(c.min) === '[200]');
    expect(moved(move.before)).toMatchObject({ max: [300], shard: donor, version: before.data!.chunkForKey.version });
    expect(moved(move.after)).toMatchObject({ max: [300], shard: recipient });
    expect(Number(moved(move.after)!.version.split('|')[0])).toBeGreaterThan(Number(before.data!.chunkForKey.version.split('|')[0]));
    const event = await eventually(async () => sio.received.find((e) => e.kind === 'moveChunk.commit'), 'the move on socket.io', 10_000);
    expect(event.seq).toBe(move.seq);

    const migrations = await eventually(async () => {
      const answer = await graphql<{
        migrations: {
          active: unknown[];
          recent: Array<{ outcome: string; donor: string; recipient: string; phases: Array<{ phase: string; ms: number | null }> }>;
        };
      }>(`{ migrations(ns: "${NS}") { active { migrationId } recent { outcome donor recipient phases { phase ms } } } }`);
      return answer.data?.migrations.recent.length ? answer.data.migrations : undefined;
    }, 'the migration among the recent ones');
    expect(migrations.active).toEqual([]);
    expect(migrations.recent[0]).toMatchObject({ outcome: 'committed', donor, recipient });
    expect(migrations.recent[0]!.phases.map((p) => p.phase)).toContain('criticalSection');
  });

  it('refuses a socket.io client without a token', async () => {
    const socket = io(`${cluster.node('config').url}/events`, { transports: ['websocket'], reconnection: false });
    cleanups.push(() => socket.disconnect());
    const error = await new Promise<Error>((resolve) => socket.on('connect_error', resolve));
    expect(error.message).toMatch(/UNAUTHORIZED/);
  });

  it('serves introspection and GraphiQL from local files in development only', async () => {
    const introspect = '{ __schema { queryType { name } } }';
    expect((await graphql(introspect, {}, VIEWER, 'config1')).data).toEqual({ __schema: { queryType: { name: 'Query' } } });
    expect((await graphql(introspect, {}, VIEWER, 'config')).errors?.[0]?.extensions?.code).toBe('BAD_VALUE');
    const page = await fetch(`${cluster.node('config1').url}/graphiql`);
    const html = await page.text();
    expect(html).not.toMatch(/https?:\/\/(?!127)/);
    for (const asset of html.matchAll(/(?:src|href)="(\/graphiql\/assets\/[^"]+)"/g)) {
      const response = await fetch(`${cluster.node('config1').url}${asset[1]}`);
      expect(response.status, asset[1]).toBe(200);
      expect((await response.arrayBuffer()).byteLength).toBeGreaterThan(1000);
    }
    expect((await fetch(`${cluster.node('config').url}/graphiql`)).status).toBe(404);
  });

  it('publishes what a shard reports on migrationProgress, and refuses a malformed report', async () => {
    const since = await lastEventSeq('config1');
    const received = subscribed<{ kind: string; shard: string; details: { clonedDocs: number } }>(
      `subscription { migrationProgress(ns: "${NS}", since: ${since}) { kind shard details } }`,
      'migrationProgress',
    );
    const config = cluster.configClient();
    await config.reportChangelog({ what: 'moveChunk.progress', ns: NS, shard: 'shard0', details: { clonedDocs: 10 } });
    const event = await eventually(async () => received[0], 'the reported progress', 10_000);
    expect(event).toEqual({ kind: 'moveChunk.progress', shard: 'shard0', details: { clonedDocs: 10 } });
    await expect(config.reportChangelog({ what: 'not a kind!' })).rejects.toMatchObject({ code: 'BAD_VALUE' });
  });
  it('runs the balancer from GraphQL on either config process: state, settings, collection options, status and rounds', async () => {
    const rounds = subscribed<{ kind: string; details: { collections: number } }>(
      'subscription { balancerRound(since: 0) { kind details } }',
      'balancerRound',
    );
    const round = await eventually(async () => rounds.find((r) => r.details.collections >= 1), `a round over ${NS} on the stream`, 10_000);
    expect(round.kind).toBe('balancer.round');

    const STATUS = '{ balancerStatus { mode inBalancerRound lastRound { startedAt durationMs migrations { reason } errors { code } } } }';
    for (const node of ['config', 'config1']) {
      const status = await graphql<{ balancerStatus: { mode: string; lastRound: { startedAt: string } | null } }>(STATUS, {}, VIEWER, node);
      expect(status.errors).toBeUndefined();
      expect(status.data!.balancerStatus.mode).toBe('full');
      expect(status.data!.balancerStatus.lastRound?.startedAt, `${node} answers with the leader's last round`).toBeTruthy();
    }

    const off = await admin<{ setBalancerState: { mode: string } }>('mutation { setBalancerState(enabled: false) { mode } }');
    expect(off.setBalancerState.mode).toBe('off');
    const updated = await admin<{ updateClusterSettings: { balancer: { activeWindow: unknown; policy: string }; chunkSizeBytes: number } }>(
      `mutation { updateClusterSettings(input: { activeWindow: { start: "23:00", stop: "04:00" }, policy: "chunkCount", chunkSizeBytes: 1048576 })
         { balancer { activeWindow { start stop } policy } chunkSizeBytes } }`,
    );
    expect(updated.updateClusterSettings).toEqual({
      balancer: { activeWindow: { start: '23:00', stop: '04:00' }, policy: 'chunkCount' },
      chunkSizeBytes: 1048576,
    });
    const refused = await graphql(
      'mutation { updateClusterSettings(input: { chunkSizeBytes: 1000, activeWindow: { start: "25:00", stop: "01:00" } }) { autoSplit } }',
      {},
      ADMIN,
    );
    expect(refused.errors?.[0]?.extensions?.code).toBe('BAD_VALUE');
    expect(refused.errors?.[0]?.message).toMatch(/64 KiB|HH:MM/);
    const settings = await graphql<{ clusterSettings: { balancer: { mode: string; activeWindow: unknown }; chunkSizeBytes: number } }>(
      '{ clusterSettings { balancer { mode activeWindow { start } } chunkSizeBytes } }',
      {},
      VIEWER,
      'config1',
    );
    expect(settings.data!.clusterSettings, 'nothing of the refused update was applied').toEqual({
      balancer: { mode: 'off', activeWindow: { start: '23:00' } },
      chunkSizeBytes: 1048576,
    });

    const CONFIGURE = `mutation ($chunkSizeBytes: Float) { configureCollectionBalancing(ns: "${NS}", chunkSizeBytes: $chunkSizeBytes, enableAutoMerger: false)
      { chunkSizeBytes autoMergingEnabled balancingEnabled defragmenting } }`;
    expect(
      (await admin<{ configureCollectionBalancing: unknown }>(CONFIGURE, { chunkSizeBytes: 65536 })).configureCollectionBalancing,
    ).toEqual({
      chunkSizeBytes: 65536,
      autoMergingEnabled: false,
      balancingEnabled: true,
      defragmenting: false,
    });
    const reset = await admin<{ configureCollectionBalancing: { chunkSizeBytes: number | null } }>(CONFIGURE, { chunkSizeBytes: null });
    expect(reset.configureCollectionBalancing.chunkSizeBytes, 'null goes back to the cluster default').toBeNull();
    const unknown = await graphql('mutation { configureCollectionBalancing(ns: "cp.nothing", enableBalancing: false) { ns } }', {}, ADMIN);
    expect(unknown.errors?.[0]?.extensions?.code).toBe('NAMESPACE_NOT_FOUND');
    expect((await graphql('mutation { setBalancerState(enabled: true) { mode } }')).errors?.[0]?.extensions?.code).toBe('FORBIDDEN');

    await admin(
      'mutation { updateClusterSettings(input: { balancerMode: "full", activeWindow: null, policy: "dataSize", chunkSizeBytes: 134217728 }) { autoSplit } }',
    );

    const compliance = await graphql<{ balancerCollectionStatus: { balancerCompliant: boolean; firstComplianceViolation: string | null } }>(
      `{ balancerCollectionStatus(ns: "${NS}") { balancerCompliant firstComplianceViolation } }`,
    );
    expect(compliance.data!.balancerCollectionStatus).toEqual({ balancerCompliant: true, firstComplianceViolation: null });
  });
});
