import { randomUUID } from 'node:crypto';
import { createClient } from 'graphql-ws';
import { io } from 'socket.io-client';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConfigClient } from '@tessera/protocol';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';
import { FAST_CONFIG_ENV, controlPlane, eventually, waitForLeader } from './helpers.js';
import { startTestCluster } from './test-cluster.js';

const VIEWER = 'viewer-token-for-the-sessions-test';

let cluster: LocalCluster;
let dispose: () => Promise<void>;
let config: ConfigClient;
const cleanups: Array<() => unknown> = [];

beforeAll(async () => {
  ({ cluster, dispose } = await startTestCluster({
    shards: 1,
    routers: 0,
    configs: 1,
    env: {
      ...FAST_CONFIG_ENV,
      TESSERA_VIEWER_TOKEN: VIEWER,
      TESSERA_LOGICAL_SESSION_REFRESH_MILLIS: '200',
      // Three seconds: a session kept alive every 200 ms never comes near it, an abandoned one soon passes it.
      TESSERA_LOCAL_LOGICAL_SESSION_TIMEOUT_MINUTES: '0.05',
      TESSERA_LOG_LEVEL: 'warn',
    },
  }));
  config = cluster.configClient();
  await waitForLeader(config);
});
afterAll(async () => {
  for (const cleanup of cleanups) await cleanup();
  await dispose?.();
});

interface SessionEvent {
  seq: number;
  kind: string;
  details: { node?: string; lsids?: string[] };
}

function graphql<T>(query: string, variables: Record<string, unknown> = {}): Promise<T> {
  return controlPlane<T>(cluster.node('config').url, VIEWER, query, variables);
}

/** Every event of `sessionEvents(since)` over graphql-ws, as it arrives. */
function subscribeGraphql(since: number): SessionEvent[] {
  const client = createClient({
    url: `${cluster.node('config').url.replace('http', 'ws')}/graphql`,
    webSocketImpl: WebSocket,
    connectionParams: { authorization: VIEWER },
    retryAttempts: 0,
  });
  cleanups.push(() => client.dispose());
  const received: SessionEvent[] = [];
  client.subscribe<{ sessionEvents: SessionEvent }>(
    { query: 'subscription ($since: Float) { sessionEvents(since: $since) { seq kind details } }', variables: { since } },
    { next: (v) => received.push(v.data!.sessionEvents), error: () => undefined, complete: () => undefined },
  );
  return received;
}

/** Every event of the socket.io room `topic:sessions` after `since`, as it arrives. */
async function subscribeSocket(since: number): Promise<SessionEvent[]> {
  const socket = io(`${cluster.node('config').url}/events`, { auth: { token: VIEWER }, transports: ['websocket'], reconnection: false });
  cleanups.push(() => socket.disconnect());
  const received: SessionEvent[] = [];
  socket.on('event', (event: SessionEvent) => received.push(event));
  const ack = await socket.timeout(10_000).emitWithAck('subscribe', { rooms: ['topic:sessions'], since });
  expect(ack).toMatchObject({ ok: true });
  return received;
}

/** The first event of `kind` naming `lsid`. */
function eventNaming(events: SessionEvent[], kind: string, lsid: string, where: string): Promise<SessionEvent> {
  return eventually(async () => events.find((e) => e.kind === kind && e.details.lsids?.includes(lsid)), `${kind} of ${lsid} on ${where}`);
}

/** Refreshes as router0 does, every 200 ms, with `lsid` used each time, until stopped. */
function keepAlive(lsid: string): () => void {
  const timer = setInterval(() => {
    void config
      .refreshSessions({
        node: 'router0',
        role: 'router',
        used: [{ id: lsid, lastUse: new Date().toISOString(), openCursors: 1, txnNumber: 3 }],
        ended: [],
        cached: [lsid],
      })
      .catch(() => undefined);
  }, 200);
  cleanups.push(() => clearInterval(timer));
  return () => clearInterval(timer);
}

const SESSIONS = `query ($node: String) {
  sessions(filter: { node: $node }) { totalCount nodes { lsid openCursors highestTxnNumber nodes { node role openCursors txnNumber } } }
}`;

interface SessionsAnswer {
  sessions: {
    totalCount: number;
    nodes: Array<{ lsid: string; openCursors: number; highestTxnNumber: number | null; nodes: Array<Record<string, unknown>> }>;
  };
}

describe('logical sessions on the config server', () => {
  it('shows refreshed sessions on the control plane and streams their start, end and expiry', async () => {
    const { cluster: overview } = await graphql<{ cluster: { lastEventSeq: number } }>('{ cluster { lastEventSeq } }');
    const gql = subscribeGraphql(overview.lastEventSeq);
    const sio = await subscribeSocket(overview.lastEventSeq);
    const [kept, ended] = [randomUUID(), randomUUID()];

    const first = await config.refreshSessions({
      node: 'router0',
      role: 'router',
      used: [kept, ended].map((id) => ({ id, lastUse: new Date().toISOString() })),
      ended: [],
      cached: [kept, ended],
    });
    expect(first).toEqual({ expired: [], timeoutMinutes: 0.05 });
    const stop = keepAlive(kept);

    const listed = await eventually(async () => {
      const answer = await graphql<SessionsAnswer>(SESSIONS, { node: 'router0' });
      return answer.sessions.nodes.find((s) => s.lsid === kept && s.highestTxnNumber === 3);
    }, 'the kept session on the sessions query');
    expect(listed).toMatchObject({ openCursors: 1, nodes: [{ node: 'router0', role: 'router', openCursors: 1, txnNumber: 3 }] });

    const metrics = await (await fetch(`${cluster.node('config').url}/metrics`)).text();
    expect(Number(/^tessera_logical_sessions_active (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(1);

    await config.refreshSessions({ node: 'router0', role: 'router', used: [], ended: [ended], cached: [kept] });
    stop();

    const seqs: number[][] = [];
    for (const [events, where] of [
      [gql, 'graphql-ws'],
      [sio, 'socket.io'],
    ] as const) {
      const started = await eventNaming(events, 'session.started', kept, where);
      expect(started.details.node).toBe('router0');
      const endedEvent = await eventNaming(events, 'session.ended', ended, where);
      const expired = await eventNaming(events, 'session.expired', kept, where);
      seqs.push([started.seq, endedEvent.seq, expired.seq]);
    }
    // The same events with the same seqs on both transports, in commit order.
    expect(seqs[1]).toEqual(seqs[0]);
    expect([...seqs[0]!].sort((a, b) => a - b)).toEqual(seqs[0]);

    const after = await config.refreshSessions({ node: 'router0', role: 'router', used: [], ended: [], cached: [kept, ended] });
    expect(after.expired.sort()).toEqual([kept, ended].sort());
    expect((await graphql<SessionsAnswer>(SESSIONS, { node: null })).sessions.nodes.map((s) => s.lsid)).not.toContain(kept);
  });
});
