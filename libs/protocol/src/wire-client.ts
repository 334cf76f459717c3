import { constants as bufferConstants } from 'node:buffer';
import { type ClientRequest, type IncomingMessage, request as httpRequest } from 'node:http';
import type { Socket } from 'node:net';
import { TesseraError } from '@tessera/core';
import { signRequest } from './cluster-auth.js';
import { errorOfAnswer, hostUnreachable, networkTimeout } from './transport-errors.js';
import { FrameReader, PING, WIRE_PATH, WIRE_PROTOCOL, type WireResponseHead, encodeFrame } from './wire-frames.js';

/**
 * The internal wire: signed JSON requests as frames over one persistent TCP connection per
 * node, many in flight at once, answered in any order. It carries exactly what an internal HTTP
 * request carries (method, path, the signature and vector time headers, the body as signed) and
 * answers what the route would have answered, so a message is authenticated as over HTTP, each
 * one on its own. What it saves is HTTP's per-request work on both ends (parsing the request and
 * its headers, routing, the response head), which counts most where every process wakes cold
 * for each request (figures in docs/benchmarks.md).
 *
 * The connection starts as an HTTP request on the node's own port, signed like any other, that
 * asks to upgrade to `tessera-wire/1`; the node answers 101 and the socket carries frames from
 * then on. A node that answers anything else (one that does not serve the wire, or a proxy
 * that drops the upgrade) is sent its requests over HTTP, and asked again a minute later.
 *
 * A connection that closes fails its requests in flight with `HOST_UNREACHABLE` (a write
 * among them may or may not have been applied, as when an HTTP connection drops); the next
 * request opens a new one. A request that times out sends a ping behind it: a connection whose
 * node does not answer that either is closed, so a peer gone silent (a host lost without a
 * reset) costs one timeout, not one per request until TCP gives up. With one connection per
 * node, a large message holds up those behind it for its transfer time (tens of ms for the
 * 48 MiB largest body, on loopback).
 */
export interface WireExchange {
  status: number;
  /** The response's signature and vector time headers, by lower-case name. */
  headers: Record<string, string>;
  text: string;
}

export interface WireAgentOptions {
  clusterKey: string;
  now?: () => number;
  /** How long opening a connection (TCP and the upgrade) may take. Default 5 s. */
  connectTimeoutMs?: number;
  /** The longest answer frame taken from a node; a longer one fails its request alone. Default: V8's longest string. */
  maxFrameBytes?: number;
  /** How long a connection's node has to answer the ping sent after a timeout. Default 10 s. */
  pingTimeoutMs?: number;
  /** Told when a node does not take the wire and its requests go over HTTP for a while. */
  onFallback?: (origin: string, reason: string) => void;
}

/** No answer longer than V8's longest string could be read, whatever the transport. */
const DEFAULT_MAX_FRAME_BYTES = bufferConstants.MAX_STRING_LENGTH;
/** How long a node that refused the upgrade is sent its requests over HTTP before it is asked again. */
const HTTP_FALLBACK_MS = 60_000;

/** The wire connections of one process, one per node; close it at shutdown. */
export class WireAgent {
  private readonly connections = new Map<string, WireConnection>();
  private closed = false;

  constructor(private readonly options: WireAgentOptions) {}

  /**
   * The connection to the node at `origin`; undefined for an `https:` node, which stays on
   * HTTP, and for one that refused the upgrade within the last minute.
   */
  connectionTo(origin: string): WireConnection | undefined {
    if (this.closed) throw new TesseraError('SHUTDOWN_IN_PROGRESS', 'this process is shutting down');
    let connection = this.connections.get(origin);
    if (connection === undefined) {
      const url = new URL(origin);
      if (url.protocol !== 'http:') return undefined;
      connection = new WireConnection(url, this.options);
      this.connections.set(origin, connection);
    }
    return connection.takesWire() ? connection : undefined;
  }

  /**
   * Closes every connection once its requests in flight are answered, or `graceMs` has passed:
   * those still in flight then fail with `HOST_UNREACHABLE`. New requests are refused at once.
   */
  async close(graceMs = 0): Promise<void> {
    this.closed = true;
    const connections = [...this.connections.values()];
    this.connections.clear();
    await Promise.all(connections.map((connection) => connection.close(graceMs)));
  }
}

interface InFlight {
  resolve: (exchange: WireExchange) => void;
  reject: (error: TesseraError) => void;
  timer: NodeJS.Timeout;
  where: string;
}

/** A socket after its upgrade, with the requests in flight on it. */
interface Link {
  socket: Socket;
  inFlight: Map<number, InFlight>;
  /** Why the socket closed, for the requests it fails. */
  failure: string;
  pinging: boolean;
  /** Called when the last request in flight is answered. */
  idle?: () => void;
}

/** What opening a connection came to: the link, HTTP for this node, or the error each waiting request fails with. */
type Opened = { link: Link } | { fallback: string } | { error: (where: string) => TesseraError };

/** One node's connection: opened on first use, reopened on the first use after it closes. */
export class WireConnection {
  private link: Link | undefined;
  private opening: Promise<Opened> | undefined;
  private nextId = 0;
  private closing = false;
  /** Until when the node's requests go over HTTP, since it refused the upgrade. */
  private httpUntil = 0;
  private readonly now: () => number;

  constructor(
    private readonly url: URL,
    private readonly options: WireAgentOptions,
  ) {
    this.now = options.now ?? Date.now;
  }

  /** Whether requests to the node go over this connection now, rather than HTTP. */
  takesWire(): boolean {
    return this.now() >= this.httpUntil;
  }

  /**
   * Sends one request; resolves with the node's answer, whatever its status, or with undefined
   * when the node does not take the wire: the request was not sent, and goes over HTTP.
   */
  async request(
    method: string,
    path: string,
    headers: Record<string, string>,
    body: string,
    timeoutMs: number,
  ): Promise<WireExchange | undefined> {
    const where = `${method} ${this.url.origin}${path}`;
    const opened = this.link === undefined ? await (this.opening ??= this.open()) : { link: this.link };
    if ('fallback' in opened) return undefined;
    if ('error' in opened) throw opened.error(where);
    const { link } = opened;
    if (link.socket.destroyed) throw hostUnreachable(where, this.url.origin, link.failure);
    const id = this.newId();
    const frame = encodeFrame({ id, method, path, headers }, body);
    return new Promise<WireExchange>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.settled(link, id);
        reject(networkTimeout(where, this.url.origin, timeoutMs));
        this.ping(link);
      }, timeoutMs);
      link.inFlight.set(id, { resolve, reject, timer, where });
      link.socket.write(frame);
    });
  }

  /**
   * Closes the connection for good once its requests in flight are answered or `graceMs` has
   * passed, and one still opening as soon as it opens.
   */
  async close(graceMs = 0): Promise<void> {
    this.closing = true;
    const link = this.link;
    if (link === undefined) return;
    if (link.inFlight.size > 0 && graceMs > 0) {
      await new Promise<void>((resolve) => {
        link.idle = resolve;
        setTimeout(resolve, graceMs).unref();
      });
    }
    link.socket.destroy();
  }

  private newId(): number {
    this.nextId = this.nextId >= 0x7fffffff ? 1 : this.nextId + 1;
    return this.nextId;
  }

  /** Forgets request `id` on `link`, answered or given up. */
  private settled(link: Link, id: number): void {
    link.inFlight.delete(id);
    if (link.inFlight.size === 0) link.idle?.();
  }

  /** After a timeout: closes the connection unless its node answers a ping in time. */
  private ping(link: Link): void {
    if (link.pinging || link.socket.destroyed) return;
    link.pinging = true;
    const pingTimeoutMs = this.options.pingTimeoutMs ?? 10_000;
    const id = this.newId();
    const timer = setTimeout(() => {
      link.failure = `no answer to a ping within ${pingTimeoutMs} ms after a request timed out`;
      link.socket.destroy();
    }, pingTimeoutMs);
    const done = () => (link.pinging = false);
    link.inFlight.set(id, { resolve: done, reject: done, timer, where: PING });
    link.socket.write(encodeFrame({ id, method: PING, path: WIRE_PATH, headers: {} }, ''));
  }

  /**
   * Opens the connection with an upgrade request; each request waiting for it shares the outcome.
   * Within `connectTimeoutMs` or not at all: the opening then fails with `NETWORK_TIMEOUT`.
   */
  private open(): Promise<Opened> {
    const origin = this.url.origin;
    const timeoutMs = this.options.connectTimeoutMs ?? 5_000;
    let deadline: NodeJS.Timeout | undefined;
    return new Promise<Opened>((resolve) => {
      const upgrade = this.requestUpgrade();
      // Until the opening settles: a refusal's body that never ends must not hold it either.
      deadline = setTimeout(() => {
        upgrade.destroy();
        resolve({ error: (where) => networkTimeout(where, origin, timeoutMs) });
      }, timeoutMs);
      upgrade.on('upgrade', (response, socket, head) => resolve(this.takeUpgraded(response, socket, head)));
      upgrade.on('response', (response) => this.readRefusal(response, resolve));
      upgrade.on('error', (error: Error & { code?: string }) => {
        resolve({ error: (where) => hostUnreachable(where, origin, error.code ?? error.message, error) });
      });
      upgrade.end();
    }).finally(() => {
      clearTimeout(deadline);
      this.opening = undefined;
    });
  }

  /** The signed `GET` on the node's own port that asks to upgrade to the wire; not sent until ended. */
  private requestUpgrade(): ClientRequest {
    return httpRequest({
      // An IPv6 literal's brackets belong to the URL, not to the address.
      host: this.url.hostname.replace(/^\[(.*)\]$/, '$1'),
      port: this.url.port === '' ? 80 : Number(this.url.port),
      method: 'GET',
      path: WIRE_PATH,
      agent: false,
      headers: {
        connection: 'Upgrade',
        upgrade: WIRE_PROTOCOL,
        ...signRequest(this.options.clusterKey, 'GET', WIRE_PATH, '', this.now()),
      },
    });
  }

  /**
   * An upgrade answered: the socket becomes the link (closed at once if the connection is closing
   * meanwhile) when the node switched to the wire's protocol; the node goes over HTTP otherwise.
   */
  private takeUpgraded(response: IncomingMessage, socket: Socket, head: Buffer): Opened {
    if (response.headers.upgrade?.toLowerCase() !== WIRE_PROTOCOL) {
      socket.destroy();
      return this.fallBackToHttp(`the upgrade was answered with ${response.headers.upgrade ?? 'no protocol'}, not ${WIRE_PROTOCOL}`);
    }
    const link = this.attach(socket, head);
    if (this.closing) socket.destroy();
    return { link };
  }

  /** An upgrade refused with an HTTP answer: reads it to its end and resolves the opening with what it says. */
  private readRefusal(response: IncomingMessage, resolve: (opened: Opened) => void): void {
    const origin = this.url.origin;
    const chunks: Buffer[] = [];
    response.on('data', (chunk: Buffer) => chunks.push(chunk));
    response.on('end', () => {
      const error = errorOfAnswer(Buffer.concat(chunks).toString('utf8'), origin);
      // A node shutting down refuses its wire as it refuses HTTP requests; any other refusal
      // says the node does not take the wire, and HTTP will get the request's own answer.
      if (error?.code === 'SHUTDOWN_IN_PROGRESS')
        resolve({ error: (where) => new TesseraError(error.code, `${where}: ${error.message}`, { answeredBy: origin }) });
      else
        resolve(
          this.fallBackToHttp(
            `the upgrade to ${WIRE_PROTOCOL} was answered HTTP ${response.statusCode ?? 0}${error ? `: ${error.message}` : ''}`,
          ),
        );
    });
    response.on('error', (error) => resolve({ error: (where) => hostUnreachable(where, origin, error.message, error) }));
  }

  /** Sends the node's requests over HTTP for `HTTP_FALLBACK_MS`, and says why. */
  private fallBackToHttp(reason: string): Opened {
    this.httpUntil = this.now() + HTTP_FALLBACK_MS;
    this.options.onFallback?.(this.url.origin, reason);
    return { fallback: reason };
  }

  private attach(socket: Socket, head: Buffer): Link {
    socket.setNoDelay(true);
    socket.setKeepAlive(true, 30_000);
    // Requests in flight hold their timers, which keep the process alive; an idle connection must not.
    socket.unref();
    const link: Link = { socket, inFlight: new Map(), failure: 'connection closed', pinging: false };
    this.link = link;
    const maxFrameBytes = this.options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
    const reader = new FrameReader<WireResponseHead>(maxFrameBytes);
    const deliver = (chunk: Buffer) => {
      let frames;
      try {
        frames = reader.push(chunk);
      } catch (error) {
        link.failure = (error as Error).message;
        socket.destroy();
        return;
      }
      for (const frame of frames) {
        const request = link.inFlight.get(frame.head.id);
        if (request === undefined) continue; // timed out meanwhile
        clearTimeout(request.timer);
        this.settled(link, frame.head.id);
        if ('oversizedBytes' in frame) {
          request.reject(
            new TesseraError(
              'INTERNAL',
              `${request.where}: the answer of ${frame.oversizedBytes} bytes is over the limit of ${maxFrameBytes}`,
              {
                details: { url: this.url.origin, bytes: frame.oversizedBytes },
              },
            ),
          );
        } else {
          request.resolve({ status: frame.head.status, headers: frame.head.headers, text: frame.body.toString('utf8') });
        }
      }
    };
    if (head.length > 0) deliver(head);
    socket.on('data', deliver);
    socket.on('error', (error: Error & { code?: string }) => (link.failure = error.code ?? error.message));
    socket.on('close', () => {
      if (this.link === link) this.link = undefined;
      for (const request of link.inFlight.values()) {
        clearTimeout(request.timer);
        request.reject(hostUnreachable(request.where, this.url.origin, link.failure));
      }
      link.inFlight.clear();
      link.idle?.();
    });
    return link;
  }
}
