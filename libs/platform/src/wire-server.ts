import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import secureJson from 'secure-json-parse';
import { TesseraError } from '@tessera/core';
import {
  FrameReader,
  MAX_HEAD_BYTES,
  PING,
  SIGNATURE_HEADER,
  SIGNED_HEADERS,
  WIRE_PATH,
  WIRE_PROTOCOL,
  type WireRequestHead,
  encodeFrame,
  httpStatusFor,
  signResponse,
  vectorTimeHeaders,
} from '@tessera/protocol';
import { verifyInternalRequest } from './cluster-auth.guard.js';
import { errorAnswer, renderError } from './error.filter.js';
import type { HotRoute } from './hot-routes.js';
import { MetricsService } from './metrics.js';
import { VectorClockService } from './vector-clock.service.js';

/** The response headers a wire answer carries: what the client verifies and gossips from. */
const ANSWERED_HEADERS = [SIGNATURE_HEADER, ...SIGNED_HEADERS] as const;
/** Past this many frames in flight on one connection, it is read no more until answers go out. */
const MAX_IN_FLIGHT_PER_CONNECTION = 256;
/** How long a refused or closing connection may stay open for its peer to read the last bytes. */
const LINGER_MS = 2_000;

export interface WireServerOptions {
  clusterKey: string;
  logger: Logger;
  /** The largest request body, as HTTP's body limit: a larger one is answered `DOCUMENT_TOO_LARGE`. */
  maxBodyBytes: number;
}

interface Answer {
  status: number;
  headers: Record<string, string>;
  text: string;
}

/**
 * Serves the internal wire (see wire-client.ts in @tessera/protocol) on the app's own port: a
 * signed HTTP request to `/internal/wire` asking to upgrade to `tessera-wire/1` turns its socket
 * into a stream of request frames. A frame for one of `routes` (the data path's hot routes) is
 * verified and answered as `serveHotRoutes` answers over HTTP; any other is injected into the
 * app, through Nest's whole pipeline, so every internal route answers over the wire exactly as
 * over HTTP. Answers are signed as HTTP answers are, and time the same metric. A body over the
 * HTTP limit fails only its own frame, with `DOCUMENT_TOO_LARGE`.
 *
 * Once a node serves the wire, Node hands it every request that asks for any upgrade: those
 * that are not for the wire are answered 404, and any refused connection is closed.
 *
 * On shutdown, frames that arrive are answered `SHUTDOWN_IN_PROGRESS`; once those in flight
 * are answered, the sockets close, before the server does.
 */
export function serveWire(app: NestFastifyApplication, routes: readonly HotRoute[], options: WireServerOptions): void {
  new WireServer(app, routes, options).listen();
}

class WireServer {
  private readonly fastify: FastifyInstance;
  private readonly clock: VectorClockService;
  private readonly metrics: MetricsService;
  /** The hot routes answered without the app's pipeline, by path. */
  private readonly direct: Map<string, HotRoute>;
  private readonly sockets = new Set<Socket>();
  private inFlight = 0;
  private closing = false;
  private drained: (() => void) | undefined;

  constructor(
    app: NestFastifyApplication,
    routes: readonly HotRoute[],
    private readonly options: WireServerOptions,
  ) {
    this.fastify = app.getHttpAdapter().getInstance();
    this.clock = app.get(VectorClockService);
    this.metrics = app.get(MetricsService);
    this.direct = new Map(routes.filter((route) => !route.url.includes(':')).map((route) => [route.url, route]));
  }

  listen(): void {
    this.fastify.server.on('upgrade', (request: IncomingMessage, socket: Socket, head: Buffer) => this.upgrade(request, socket, head));
    // The server counts upgraded sockets among its connections and would wait for them to close:
    // they close before it does, once the frames in flight are answered.
    this.fastify.addHook('preClose', async () => {
      this.closing = true;
      if (this.inFlight > 0) await new Promise<void>((resolve) => (this.drained = resolve));
      for (const socket of this.sockets) linger(socket);
    });
  }

  private upgrade(request: IncomingMessage, socket: Socket, head: Buffer): void {
    // Node took the server's own listeners off this socket: without one, a peer's reset would
    // be an unhandled 'error' event and end the process.
    socket.on('error', () => undefined); // a peer gone away; 'close' follows
    const refusal = this.closing ? new TesseraError('SHUTDOWN_IN_PROGRESS', 'the node is shutting down') : this.refusal(request);
    if (refusal !== undefined) {
      const text = JSON.stringify(renderError(refusal.toEnvelope(), WIRE_PATH));
      socket.write(
        `HTTP/1.1 ${httpStatusFor(refusal.code)} Refused\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n\r\n${text}`,
      );
      linger(socket);
      return;
    }
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nupgrade: ${WIRE_PROTOCOL}\r\nconnection: Upgrade\r\n\r\n`);
    socket.setNoDelay(true);
    socket.setKeepAlive(true, 30_000);
    this.sockets.add(socket);
    socket.on('close', () => this.sockets.delete(socket));
    const reader = new FrameReader<WireRequestHead>(this.options.maxBodyBytes + MAX_HEAD_BYTES);
    let pending = 0;
    const answered = () => {
      pending -= 1;
      if (socket.isPaused() && pending < MAX_IN_FLIGHT_PER_CONNECTION) socket.resume();
    };
    const receive = (chunk: Buffer) => {
      let frames;
      try {
        frames = reader.push(chunk);
      } catch (error) {
        this.options.logger.warn({ err: error, remote: socket.remoteAddress }, `closing a wire connection: ${(error as Error).message}`);
        socket.destroy();
        return;
      }
      for (const frame of frames) {
        if (frame.head.method === PING) {
          send(socket, { id: frame.head.id, status: 200, headers: {}, text: '' });
          continue;
        }
        pending += 1;
        void this.serve(socket, frame.head, 'oversizedBytes' in frame ? frame.oversizedBytes : frame.body, answered);
      }
      if (pending >= MAX_IN_FLIGHT_PER_CONNECTION) socket.pause();
    };
    if (head.length > 0) receive(head);
    socket.on('data', receive);
  }

  /** Why an upgrade request may not become a wire connection, or undefined when it may. */
  private refusal(request: IncomingMessage): TesseraError | undefined {
    if (request.url !== WIRE_PATH || request.headers.upgrade?.toLowerCase() !== WIRE_PROTOCOL) {
      return new TesseraError(
        'NOT_FOUND',
        `no upgrade to ${request.headers.upgrade ?? '(none)'} at ${request.url ?? ''}: only ${WIRE_PROTOCOL} at ${WIRE_PATH}`,
      );
    }
    try {
      verifyInternalRequest({ method: 'GET', url: WIRE_PATH, headers: request.headers }, this.options.clusterKey, this.clock);
      return undefined;
    } catch (error) {
      return error as TesseraError;
    }
  }

  /** Answers one request frame on `socket`; `body` is the body's length when it was dropped as too large. */
  private async serve(socket: Socket, request: WireRequestHead, body: Buffer | number, done: () => void): Promise<void> {
    this.inFlight += 1;
    try {
      send(socket, await this.answer(request, body), done);
    } catch (error) {
      // answer() answers every error; one it could not is this connection's end.
      this.options.logger.error({ err: error, remote: socket.remoteAddress }, 'closing a wire connection: a frame could not be answered');
      socket.destroy();
      done();
    } finally {
      this.inFlight -= 1;
      if (this.inFlight === 0) this.drained?.();
    }
  }

  private async answer(request: WireRequestHead, body: Buffer | number): Promise<Answer & { id: number }> {
    const started = performance.now();
    const valid = isRequestHead(request);
    const route = valid && request.method === 'POST' ? this.direct.get(request.path) : undefined;
    let answer: Answer;
    try {
      if (!valid) throw new TesseraError('BAD_VALUE', 'bad wire frame: its head needs an HTTP method, a path and string headers');
      if (this.closing) throw new TesseraError('SHUTDOWN_IN_PROGRESS', 'the node is shutting down');
      const bytes = typeof body === 'number' ? body : body.length;
      if (bytes > this.options.maxBodyBytes) {
        throw new TesseraError(
          'DOCUMENT_TOO_LARGE',
          `request body too large: ${bytes} bytes, over the limit of ${this.options.maxBodyBytes}`,
        );
      }
      const content = body as Buffer;
      answer =
        route === undefined
          ? await this.answerByInjection(request, content)
          : this.signed(request, 200, await this.answerDirectly(route, request, content));
    } catch (error) {
      const id = (valid ? request.headers['x-request-id'] : undefined) ?? randomUUID();
      const { status, body: rendered } = errorAnswer(
        error,
        { id, method: valid ? request.method : '(invalid)', url: valid ? request.path : WIRE_PATH },
        this.options.logger,
      );
      answer = valid ? this.signed(request, status, rendered) : { status, headers: {}, text: JSON.stringify(rendered) };
    }
    if (route !== undefined) {
      this.metrics.httpDuration.observe(
        { method: request.method, route: request.path, status: String(answer.status) },
        (performance.now() - started) / 1000,
      );
    }
    return { id: request.id, ...answer };
  }

  /** Answers a frame for a hot route, as the route's HTTP handler would: verified, then handled. */
  private async answerDirectly(route: HotRoute, request: WireRequestHead, body: Buffer): Promise<unknown> {
    verifyInternalRequest(
      { method: request.method, url: request.path, headers: request.headers, rawBody: body },
      this.options.clusterKey,
      this.clock,
    );
    return route.handle(parseBody(body), {}, { bodyBytes: body.length });
  }

  /** `result` as the answer to `request`, with the vector time and signature the app's hooks put on an HTTP answer. */
  private signed(request: WireRequestHead, status: number, result: unknown): Answer {
    const text = result === undefined ? '' : JSON.stringify(result);
    const time = vectorTimeHeaders(this.clock.now());
    const signature = request.headers[SIGNATURE_HEADER];
    return {
      status,
      text,
      headers:
        signature === undefined ? time : { ...time, [SIGNATURE_HEADER]: signResponse(this.options.clusterKey, signature, text, time) },
    };
  }

  /** Answers any other frame by injecting it into the app as the HTTP request it stands for. */
  private async answerByInjection(request: WireRequestHead, body: Buffer): Promise<Answer> {
    const response = await this.fastify.inject({
      method: request.method as 'GET',
      url: request.path,
      headers: request.headers,
      ...(body.length > 0 ? { payload: body } : {}),
    });
    const headers: Record<string, string> = {};
    for (const name of ANSWERED_HEADERS) {
      const value = response.headers[name];
      if (typeof value === 'string') headers[name] = value;
    }
    return { status: response.statusCode, headers, text: response.payload };
  }
}

/** Writes an answer's frame while the connection takes writes; `done` runs once it is written or dropped. */
function send(socket: Socket, answer: Answer & { id: number }, done?: () => void): void {
  if (!socket.writable) {
    done?.();
    return;
  }
  socket.write(encodeFrame({ id: answer.id, status: answer.status, headers: answer.headers }, answer.text), () => done?.());
}

/** Ends a connection, and destroys it if its peer has not closed its side by `LINGER_MS` later. */
function linger(socket: Socket): void {
  socket.end();
  setTimeout(() => socket.destroy(), LINGER_MS).unref();
}

/** The methods of internal routes. */
const METHODS = new Set(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']);

function isRequestHead(head: WireRequestHead): boolean {
  const { method, path, headers } = head as Partial<WireRequestHead>;
  return (
    typeof method === 'string' &&
    METHODS.has(method) &&
    typeof path === 'string' &&
    path.startsWith('/') &&
    typeof headers === 'object' &&
    headers !== null &&
    Object.values(headers).every((value) => typeof value === 'string')
  );
}

/** The body's JSON, parsed as Fastify parses an HTTP body: a `__proto__` or `constructor.prototype` key is refused. */
function parseBody(body: Buffer): unknown {
  if (body.length === 0) return undefined;
  try {
    return secureJson.parse(body, undefined, { protoAction: 'error', constructorAction: 'error' }) as unknown;
  } catch (error) {
    throw new TesseraError('BAD_VALUE', `bad request: the body is not JSON: ${(error as Error).message}`);
  }
}
