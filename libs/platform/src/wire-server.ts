import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { Logger } from 'pino';
import { TesseraError } from '@tessera/core';
import {
  CONFIG_TIME_HEADER,
  FrameReader,
  SIGNATURE_HEADER,
  TOPOLOGY_TIME_HEADER,
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
const ANSWERED_HEADERS = [SIGNATURE_HEADER, CONFIG_TIME_HEADER, TOPOLOGY_TIME_HEADER] as const;

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
 * over HTTP. Answers are signed as HTTP answers are, and time the same metric.
 *
 * On shutdown, frames that arrive are answered `SHUTDOWN_IN_PROGRESS`; once those in flight
 * are answered, the sockets close, before the server does.
 */
export function serveWire(
  app: NestFastifyApplication,
  routes: readonly HotRoute[],
  clusterKey: string,
  logger: Logger,
  maxFrameBytes: number,
): void {
  const fastify = app.getHttpAdapter().getInstance();
  const clock = app.get(VectorClockService);
  const metrics = app.get(MetricsService);
  const direct = new Map(routes.filter((route) => !route.url.includes(':')).map((route) => [route.url, route]));
  const sockets = new Set<Socket>();
  let inFlight = 0;
  let closing = false;
  let drained: (() => void) | undefined;

  /** Answers a frame for a hot route, as the route's HTTP handler and the app's hooks would. */
  const answerDirectly = async (route: HotRoute, request: WireRequestHead, body: Buffer): Promise<Answer> => {
    let status = 200;
    let result: unknown;
    try {
      verifyInternalRequest({ method: request.method, url: request.path, headers: request.headers, rawBody: body }, clusterKey, clock);
      result = await route.handle(parseBody(body), {}, { bodyBytes: body.length });
    } catch (error) {
      const id = request.headers['x-request-id'] ?? randomUUID();
      ({ status, body: result } = errorAnswer(error, { id, method: request.method, url: request.path }, logger));
    }
    const text = result === undefined ? '' : JSON.stringify(result);
    const time = vectorTimeHeaders(clock.now());
    const signature = request.headers[SIGNATURE_HEADER];
    return {
      status,
      text,
      headers: signature === undefined ? time : { ...time, [SIGNATURE_HEADER]: signResponse(clusterKey, signature, text, time) },
    };
  };

  /** Answers any other frame by injecting it into the app as the HTTP request it stands for. */
  const answerByInjection = async (request: WireRequestHead, body: Buffer): Promise<Answer> => {
    const response = await fastify.inject({
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
  };

  const answer = async (socket: Socket, request: WireRequestHead, body: Buffer): Promise<void> => {
    const started = performance.now();
    inFlight += 1;
    try {
      const route = request.method === 'POST' ? direct.get(request.path) : undefined;
      let answered: Answer;
      try {
        if (closing) throw new TesseraError('SHUTDOWN_IN_PROGRESS', 'the node is shutting down');
        answered = route === undefined ? await answerByInjection(request, body) : await answerDirectly(route, request, body);
      } catch (error) {
        const { status, body: rendered } = errorAnswer(error, { id: randomUUID(), method: request.method, url: request.path }, logger);
        answered = { status, headers: {}, text: JSON.stringify(rendered) };
      }
      if (route !== undefined) {
        metrics.httpDuration.observe(
          { method: request.method, route: request.path, status: String(answered.status) },
          (performance.now() - started) / 1000,
        );
      }
      if (!socket.destroyed)
        socket.write(encodeFrame({ id: request.id, status: answered.status, headers: answered.headers }, answered.text));
    } finally {
      inFlight -= 1;
      if (inFlight === 0) drained?.();
    }
  };

  fastify.server.on('upgrade', (request: IncomingMessage, socket: Socket, head: Buffer) => {
    const refusal = refuseUpgrade(request, clusterKey, clock);
    if (refusal !== undefined || closing) {
      const error = refusal ?? new TesseraError('SHUTDOWN_IN_PROGRESS', 'the node is shutting down');
      const text = JSON.stringify(renderError(error.toEnvelope(), WIRE_PATH));
      socket.end(
        `HTTP/1.1 ${httpStatusFor(error.code)} Refused\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n\r\n${text}`,
      );
      return;
    }
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nupgrade: ${WIRE_PROTOCOL}\r\nconnection: Upgrade\r\n\r\n`);
    socket.setNoDelay(true);
    socket.setKeepAlive(true, 30_000);
    sockets.add(socket);
    const reader = new FrameReader<WireRequestHead>(maxFrameBytes);
    const receive = (chunk: Buffer) => {
      let frames;
      try {
        frames = reader.push(chunk);
      } catch (error) {
        logger.warn({ err: error, remote: socket.remoteAddress }, `closing a wire connection: ${(error as Error).message}`);
        socket.destroy();
        return;
      }
      for (const frame of frames) void answer(socket, frame.head, frame.body);
    };
    if (head.length > 0) receive(head);
    socket.on('data', receive);
    socket.on('error', () => undefined); // a peer gone away; 'close' follows
    socket.on('close', () => sockets.delete(socket));
  });

  // The server counts upgraded sockets among its connections and would wait for them to close:
  // they close before it does, once the frames in flight are answered.
  fastify.addHook('preClose', async () => {
    closing = true;
    if (inFlight > 0) await new Promise<void>((resolve) => (drained = resolve));
    for (const socket of sockets) socket.end();
  });
}

/** Why an upgrade request may not become a wire connection, or undefined when it may. */
function refuseUpgrade(request: IncomingMessage, clusterKey: string, clock: VectorClockService): TesseraError | undefined {
  if (request.url !== WIRE_PATH || request.headers.upgrade?.toLowerCase() !== WIRE_PROTOCOL) {
    return new TesseraError(
      'NOT_FOUND',
      `no upgrade to ${request.headers.upgrade ?? '(none)'} at ${request.url ?? ''}: only ${WIRE_PROTOCOL} at ${WIRE_PATH}`,
    );
  }
  try {
    verifyInternalRequest({ method: 'GET', url: WIRE_PATH, headers: request.headers }, clusterKey, clock);
    return undefined;
  } catch (error) {
    return error as TesseraError;
  }
}

function parseBody(body: Buffer): unknown {
  if (body.length === 0) return undefined;
  try {
    return JSON.parse(body.toString('utf8')) as unknown;
  } catch (error) {
    throw new TesseraError('BAD_VALUE', `bad request: the body is not JSON: ${(error as Error).message}`);
  }
}
