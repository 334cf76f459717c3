// The client side of the graphql-transport-ws protocol (the one graphql-ws speaks), as a pure
// state machine: feed it what the server sent, it answers with what to send back and what
// happened. k6 has no graphql-ws client, so the subscriptions workload drives this over
// k6/websockets; the end-to-end test drives it over the `ws` package.
//
//   client                              server
//     | -- connection_init {authorization} -> |
//     | <------------- connection_ack ------- |   (or close 4403 without a valid token)
//     | -- subscribe {id, query, variables} -> |
//     | <------------- next {id, payload} ---- |   (any number)
//     | <------------- ping / -> pong -------- |   (either side, any time)
//     | <------------- error | complete ------ |

/** The websocket subprotocol to ask for (Sec-WebSocket-Protocol); graphql-ws refuses others. */
export const GRAPHQL_TRANSPORT_WS = 'graphql-transport-ws';

export type ServerMessage =
  | { type: 'connection_ack'; payload?: unknown }
  | { type: 'ping'; payload?: unknown }
  | { type: 'pong'; payload?: unknown }
  | { type: 'next'; id: string; payload: { data?: unknown; errors?: Array<{ message: string }> } }
  | { type: 'error'; id: string; payload: Array<{ message: string }> }
  | { type: 'complete'; id: string };

export type ProtocolEvent =
  | { kind: 'acknowledged' }
  | { kind: 'data'; id: string; data: unknown }
  | { kind: 'error'; id: string | null; message: string }
  | { kind: 'complete'; id: string };

export interface Reaction {
  /** Messages to send, already serialized. */
  send: string[];
  events: ProtocolEvent[];
}

export interface Subscription {
  id: string;
  query: string;
  variables: Record<string, unknown>;
}

/** The URL of the graphql-ws endpoint of a config server (http -> ws, https -> wss). */
export function graphqlWsUrl(configUrl: string): string {
  return `${configUrl.replace(/^http/, 'ws')}/graphql`;
}

export class GraphqlWsProtocol {
  private acknowledged = false;
  private readonly pending: Subscription[] = [];

  constructor(private readonly token: string) {}

  get isAcknowledged(): boolean {
    return this.acknowledged;
  }

  /** What to send once the socket is open. */
  open(): string[] {
    return [JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${this.token}` } })];
  }

  /** Subscribes now if the server acknowledged the connection, else as soon as it does. */
  subscribe(subscription: Subscription): string[] {
    if (!this.acknowledged) {
      this.pending.push(subscription);
      return [];
    }
    return [subscribeMessage(subscription)];
  }

  complete(id: string): string {
    return JSON.stringify({ id, type: 'complete' });
  }

  /** Reacts to one message from the server. A message that is not the protocol's is an error event, not an exception. */
  receive(raw: string): Reaction {
    let message: ServerMessage;
    try {
      message = JSON.parse(raw) as ServerMessage;
    } catch {
      return { send: [], events: [{ kind: 'error', id: null, message: `not JSON: ${raw.slice(0, 100)}` }] };
    }
    switch (message.type) {
      case 'connection_ack': {
        this.acknowledged = true;
        const send = this.pending.map(subscribeMessage);
        this.pending.length = 0;
        return { send, events: [{ kind: 'acknowledged' }] };
      }
      case 'ping':
        return { send: [JSON.stringify({ type: 'pong' })], events: [] };
      case 'pong':
        return { send: [], events: [] };
      case 'next': {
        const firstError = message.payload.errors?.[0];
        if (firstError !== undefined) return { send: [], events: [{ kind: 'error', id: message.id, message: firstError.message }] };
        return { send: [], events: [{ kind: 'data', id: message.id, data: message.payload.data }] };
      }
      case 'error':
        return { send: [], events: [{ kind: 'error', id: message.id, message: message.payload.map((e) => e.message).join('; ') }] };
      case 'complete':
        return { send: [], events: [{ kind: 'complete', id: message.id }] };
      default:
        return {
          send: [],
          events: [{ kind: 'error', id: null, message: `unexpected message type ${String((message as { type?: unknown }).type)}` }],
        };
    }
  }
}

function subscribeMessage(subscription: Subscription): string {
  return JSON.stringify({
    id: subscription.id,
    type: 'subscribe',
    payload: { query: subscription.query, variables: subscription.variables },
  });
}

/** A placement change as the subscriptions workload selects it. */
export interface PlacementChange {
  seq: number;
  time: string;
  reason: string;
}

/**
 * Lag of one event: from its commit time on the config server to its arrival at the client, in
 * ms. Both clocks must agree (same machine, or NTP); a negative lag from clock skew counts as 0.
 */
export function eventLagMs(change: PlacementChange, receivedAtMs: number): number | null {
  const committed = Date.parse(change.time);
  return Number.isNaN(committed) ? null : Math.max(0, receivedAtMs - committed);
}
