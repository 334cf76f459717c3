// subscriptions: SUBSCRIBERS websocket clients subscribe to chunkPlacementChanged(ns) over
// graphql-ws while VUS virtual users insert random keys into the collection. The handshake
// (graphql-transport-ws: connection_init with the token, connection_ack, subscribe) is done by
// lib/graphql-ws.ts over k6/websockets. Each client counts the placement changes it receives and
// their lag (commit time on the config server to arrival; both clocks must agree). Every client
// subscribes with `since` = the seq at setup, so each should receive every split and migration of
// the run: events / SUBSCRIBERS is the number of placement changes, and the lag p99 stays under
// P99_MS while the config server fans events out.
import exec from 'k6/execution';
import type { Options } from 'k6/options';
import { setTimeout } from 'k6/timers';
import { WebSocket } from 'k6/websockets';
import {
  GRAPHQL_TRANSPORT_WS,
  GraphqlWsProtocol,
  OPERATIONS,
  type PlacementChange,
  type SetupData,
  collectionSpecOf,
  eventLagMs,
  graphqlWsUrl,
  insertBatch,
  parseWorkloadOptions,
  setupCollection,
  workloadThresholds,
} from './lib/index.ts';
import {
  commonOptions,
  errors,
  reportTeardown,
  runSequence,
  send,
  summaryOutputs,
  wsEventLagMs,
  wsEvents,
  wsHandshakeMs,
} from './support/k6-driver.ts';

const workload = parseWorkloadOptions('subscriptions', __ENV);
/** Subscribers connect first; inserts start this much later so no subscriber misses the first events live. */
const INSERTS_START_MS = 3000;

export const options: Options = {
  scenarios: {
    subscribers: {
      executor: 'per-vu-iterations',
      vus: workload.subscribers,
      iterations: 1,
      maxDuration: `${Math.ceil((workload.durationMs + INSERTS_START_MS) / 1000) + 30}s`,
      exec: 'subscribe',
    },
    inserts: {
      executor: 'constant-vus',
      vus: workload.vus,
      duration: workload.duration,
      startTime: `${INSERTS_START_MS}ms`,
      exec: 'insert',
    },
  },
  ...commonOptions(workload, workloadThresholds(workload)),
};

export function setup(): SetupData {
  return runSequence(
    workload,
    setupCollection(workload, collectionSpecOf('subscriptions', 0), () => Date.now()),
  );
}

export function insert(): void {
  send(workload, insertBatch('subscriptions', workload, exec.scenario.iterationInTest, Math.random));
}

/** One subscriber: stays subscribed until the inserts end (plus 2 s for the last events), then completes and closes. */
export function subscribe(data: SetupData): void {
  const protocol = new GraphqlWsProtocol(workload.viewerToken);
  // k6/websockets ignores its protocols argument, so the subprotocol goes in as a header.
  const socket = new WebSocket(graphqlWsUrl(workload.configUrl), null, { headers: { 'Sec-WebSocket-Protocol': GRAPHQL_TRANSPORT_WS } });
  const openedAtMs = Date.now();
  let acknowledgedAtMs: number | null = null;
  const sendAll = (messages: string[]) => messages.forEach((m) => socket.send(m));

  socket.onopen = () => {
    sendAll(protocol.open());
    sendAll(
      protocol.subscribe({ id: 'placement', query: OPERATIONS.chunkPlacementChanged, variables: { ns: data.ns, since: data.startSeq } }),
    );
  };
  socket.onmessage = (event) => {
    const receivedAtMs = Date.now();
    const reaction = protocol.receive(String(event?.data ?? ''));
    sendAll(reaction.send);
    for (const happened of reaction.events) {
      switch (happened.kind) {
        case 'acknowledged':
          acknowledgedAtMs = receivedAtMs;
          wsHandshakeMs.add(receivedAtMs - openedAtMs);
          errors.add(false, { op: 'subscribe' });
          break;
        case 'data': {
          const change = (happened.data as { chunkPlacementChanged?: PlacementChange }).chunkPlacementChanged;
          if (change === undefined) break;
          wsEvents.add(1, { reason: change.reason });
          const lag = eventLagMs(change, receivedAtMs);
          // Events replayed from `since` were committed before this client listened: no lag to measure.
          if (lag !== null && acknowledgedAtMs !== null && Date.parse(change.time) >= acknowledgedAtMs) wsEventLagMs.add(lag);
          break;
        }
        case 'error':
          console.warn(`subscriber ${exec.vu.idInTest}: ${happened.message}`);
          errors.add(true, { op: 'subscribe' });
          break;
        case 'complete':
          break;
      }
    }
  };
  socket.onerror = (event) => {
    console.warn(`subscriber ${exec.vu.idInTest}: websocket error ${event?.error ?? ''}`);
    errors.add(true, { op: 'subscribe' });
  };
  socket.onclose = () => {
    if (!protocol.isAcknowledged) errors.add(true, { op: 'subscribe' });
  };
  setTimeout(
    () => {
      if (socket.readyState === WebSocket.OPEN) socket.send(protocol.complete('placement'));
      socket.close();
    },
    workload.durationMs + INSERTS_START_MS + 2000,
  );
}

export function teardown(data: SetupData): void {
  reportTeardown(workload, data, { compliant: false });
}

export function handleSummary(data: unknown): Record<string, string> {
  return summaryOutputs(workload, data);
}
