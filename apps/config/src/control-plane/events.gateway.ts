import { type OnGatewayDisconnect, type OnGatewayInit, SubscribeMessage, WebSocketGateway } from '@nestjs/websockets';
import type { Subscription } from 'rxjs';
import type { Namespace, Socket } from 'socket.io';
import { TesseraError } from '@tessera/core';
import {
  AUDIT_ROOM,
  EVENT_TOPICS,
  type ClusterEvent,
  type EventTopic,
  type Principal,
  SOCKET_ACCESS_RULES,
  missingPrivilege,
} from '@tessera/protocol';
import { AuditFeed } from '../access/audit-feed.service.js';
import { ConfigAuthentication } from '../access/config-authentication.service.js';
import { EventBusService } from '../events/event-bus.service.js';

/** Rooms a client may join: `ns:<db.coll or db>` and `topic:<topic>`. */
const ROOM = /^(ns:[^\0]{1,300}|topic:[a-z]+)$/;
const MAX_ROOMS = 100;

interface SubscribeRequest {
  rooms?: unknown;
  since?: unknown;
}

interface SocketState {
  /** Who connected, verified at the handshake. */
  principal?: Principal;
  subscription?: Subscription;
  /** The audit feed, while the socket is in `topic:audit`. */
  audit?: Subscription;
  /** The last seq sent to this socket. */
  lastSeq?: number;
}

/** What a client's acknowledgement carries: the rooms it is in, or the error. */
type Ack = { ok: true; rooms: string[]; lastSeq: number } | { ok: false; error: { code: string; message: string } };

/**
 * socket.io namespace `/events`: the same typed events as the GraphQL subscriptions, with the
 * same seq. A client connects with a user's API key in `auth.token` (the viewer token is one;
 * rooms need what SOCKET_ACCESS_RULES names, clusterMonitor has it all), then emits
 * `subscribe` with `{rooms: ['ns:shop.orders', 'topic:placement'], since?: seq}` and receives
 * `event` messages for events in any of its rooms, in seq order; with `since` it first gets
 * every event after that seq. `unsubscribe` with `{rooms}` leaves rooms. Each socket is fed
 * from one bus stream filtered by its rooms, so the resume seam has no gap and no duplicate.
 * `topic:audit` (viewAuditLog) sends each audit entry as it is written, as an `audit` message.
 */
@WebSocketGateway({ namespace: '/events', serveClient: false })
export class EventsGateway implements OnGatewayInit<Namespace>, OnGatewayDisconnect<Socket> {
  private readonly sockets = new WeakMap<Socket, SocketState>();

  constructor(
    private readonly events: EventBusService,
    private readonly authentication: ConfigAuthentication,
    private readonly audit: AuditFeed,
  ) {}

  afterInit(namespace: Namespace): void {
    namespace.use((socket, next) => {
      const auth = socket.handshake.auth as { token?: unknown } | undefined;
      this.authentication.principalOf(auth?.token ?? socket.handshake.headers.authorization, socket.handshake.address).then(
        (principal) => {
          this.sockets.set(socket, { principal });
          next();
        },
        (refusal: unknown) => {
          const code = refusal instanceof TesseraError ? refusal.code : 'UNAUTHORIZED';
          const error = new Error(`${code}: /events needs a user's API key in auth.token`) as Error & { data?: unknown };
          error.data = { code };
          next(error);
        },
      );
    });
  }

  handleDisconnect(socket: Socket): void {
    const state = this.sockets.get(socket);
    state?.subscription?.unsubscribe();
    state?.audit?.unsubscribe();
    this.sockets.delete(socket);
  }

  @SubscribeMessage('subscribe')
  subscribe(socket: Socket, request: SubscribeRequest): Ack {
    return this.answer(() => {
      const rooms = roomsOf(request?.rooms);
      const since = request?.since;
      if (since !== undefined && since !== null && !(typeof since === 'number' && Number.isInteger(since) && since >= 0)) {
        throw new TesseraError('BAD_VALUE', `since must be a sequence number (a whole number >= 0), got ${JSON.stringify(since)}`);
      }
      this.checkRooms(socket, rooms);
      for (const room of rooms) void socket.join(room);
      this.restream(socket, typeof since === 'number' ? since : undefined);
    }, socket);
  }

  @SubscribeMessage('unsubscribe')
  unsubscribe(socket: Socket, request: SubscribeRequest): Ack {
    return this.answer(() => {
      for (const room of roomsOf(request?.rooms)) void socket.leave(room);
      this.restream(socket, undefined);
    }, socket);
  }

  /** Throws FORBIDDEN unless the socket's user may watch every room (SOCKET_ACCESS_RULES). */
  private checkRooms(socket: Socket, rooms: readonly string[]): void {
    const principal = this.sockets.get(socket)?.principal;
    if (principal === undefined) throw new TesseraError('UNAUTHORIZED', 'this socket has no verified user');
    for (const room of rooms) {
      const rule = SOCKET_ACCESS_RULES[room.startsWith('ns:') ? 'ns:' : room];
      const missing = rule === undefined ? undefined : missingPrivilege(rule, { params: {}, body: {} }, principal.roles);
      if (rule === undefined || missing !== undefined) {
        throw new TesseraError('FORBIDDEN', `not authorized to watch ${room}${missing === undefined ? '' : ` (needs ${missing.action})`}`);
      }
    }
  }

  /** Feeds the socket from one stream filtered by its current rooms (after `since` when given). */
  private restream(socket: Socket, since: number | undefined): void {
    const state = this.sockets.get(socket) ?? {};
    this.sockets.set(socket, state);
    state.subscription?.unsubscribe();
    state.audit?.unsubscribe();
    state.audit = socket.rooms.has(AUDIT_ROOM) ? this.audit.stream().subscribe((entry) => socket.emit('audit', entry)) : undefined;
    const ns = new Set<string>();
    const topics = new Set<EventTopic>();
    for (const room of socket.rooms) {
      if (room.startsWith('ns:')) ns.add(room.slice(3));
      else if (room.startsWith('topic:')) topics.add(room.slice(6) as EventTopic);
    }
    const matches = (e: ClusterEvent) => (e.ns !== null && ns.has(e.ns)) || e.topics.some((t) => topics.has(t));
    state.subscription = this.events.stream(matches, since).subscribe({
      next: (event) => {
        state.lastSeq = event.seq;
        socket.emit('event', event);
      },
      error: () => socket.disconnect(true),
    });
  }

  private answer(work: () => void, socket: Socket): Ack {
    try {
      work();
      return { ok: true, rooms: [...socket.rooms].filter((r) => r !== socket.id), lastSeq: this.events.lastSeq };
    } catch (error) {
      if (error instanceof TesseraError) return { ok: false, error: { code: error.code, message: error.message } };
      return { ok: false, error: { code: 'INTERNAL', message: 'internal error' } };
    }
  }
}

function roomsOf(value: unknown): string[] {
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_ROOMS) {
    throw new TesseraError(
      'BAD_VALUE',
      `rooms must be a list of 1 to ${MAX_ROOMS} room names such as "ns:shop.orders" or "topic:placement"`,
    );
  }
  for (const room of value) {
    if (
      typeof room !== 'string' ||
      !ROOM.test(room) ||
      (room.startsWith('topic:') && room !== AUDIT_ROOM && !EVENT_TOPICS.includes(room.slice(6) as EventTopic))
    ) {
      throw new TesseraError(
        'BAD_VALUE',
        `"${String(room)}" is not a room: use "ns:<namespace>" or "topic:<${[...EVENT_TOPICS, 'audit'].join('|')}>"`,
        {
          details: { room },
        },
      );
    }
  }
  return value as string[];
}
