import 'reflect-metadata';
import { Body, Controller, Get, Module, Param, Put, UseGuards } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { once } from 'node:events';
import { type Socket, connect, createServer } from 'node:net';
import pino from 'pino';
import { Agent } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { TesseraError, type VectorTime } from '@tessera/core';
import {
  type ClockGossip,
  FrameReader,
  InternalHttpClient,
  PING,
  type SignedHeaders,
  WIRE_PATH,
  WIRE_PROTOCOL,
  WireAgent,
  type WireAgentOptions,
  type WireRequestHead,
  type WireResponseHead,
  encodeFrame,
  signRequest,
} from '@tessera/protocol';
import { ClusterAuthGuard, guardInternalRoutes } from './cluster-auth.guard.js';
import { TesseraExceptionFilter } from './error.filter.js';
import { serveHotRoutes } from './hot-routes.js';
import { MetricsService } from './metrics.js';
import { SETTINGS } from './tokens.js';
import { VectorClockService } from './vector-clock.service.js';
import { serveWire } from './wire-server.js';

const KEY = 'k'.repeat(32);
const OTHER_KEY = 'x'.repeat(32);
/** The test node's limit on a request body. */
const MAX_BODY_BYTES = 1024 * 1024;
const logger = pino({ level: 'silent' });

@Controller('internal/things')
@UseGuards(ClusterAuthGuard)
class ThingsController {
  private readonly things = new Map<string, unknown>();

  @Put(':name')
  put(@Param('name') name: string, @Body() body: unknown): { stored: string } {
    this.things.set(name, body);
    return { stored: name };
  }

  @Get(':name')
  get(@Param('name') name: string): unknown {
    if (!this.things.has(name)) throw new TesseraError('NOT_FOUND', `no thing ${name}`, { details: { name } });
    return this.things.get(name);
  }
}

@Module({
  controllers: [ThingsController],
  providers: [VectorClockService, MetricsService, { provide: SETTINGS, useValue: { TESSERA_CLUSTER_KEY: KEY } }],
})
class TestModule {}

/** A client's clock: what it last learned from verified answers. */
class Gossip implements ClockGossip {
  time: VectorTime = { clusterTime: { t: 6, i: 2 }, configTime: { t: 5, i: 0 }, topologyTime: { t: 2, i: 0 } };
  now(): VectorTime {
    return this.time;
  }
  advance(received: Partial<VectorTime>): void {
    this.time = { ...this.time, ...received };
  }
}

describe('the internal wire (frames over an upgraded connection)', () => {
  let app: NestFastifyApplication;
  let url: string;
  const agents: WireAgent[] = [];
  const dispatcher = new Agent();
  const released: Array<() => void> = [];

  const client = (
    options: { key?: string; timeoutMs?: number; gossip?: ClockGossip; wire?: Partial<WireAgentOptions>; url?: string } = {},
  ) => {
    const { wire: wireOptions, url: nodeUrl, ...rest } = options;
    const wire = new WireAgent({ clusterKey: options.key ?? KEY, ...wireOptions });
    agents.push(wire);
    return new InternalHttpClient(nodeUrl ?? url, { clusterKey: options.key ?? KEY, dispatcher, wire, ...rest });
  };

  beforeAll(async () => {
    ({ app, url } = await startNode(released));
  });
  afterEach(async () => {
    for (const agent of agents.splice(0)) await agent.close();
    released.splice(0).forEach((release) => release());
  });
  afterAll(async () => {
    await app.close();
    await dispatcher.close();
  });

  it('answers a hot route as HTTP does, and each side advances its clock from the signed vector time', async () => {
    const gossip = new Gossip();
    const answer = await client({ gossip }).call('POST', '/internal/echo', { a: [1, 'é'] });
    expect(answer).toEqual({ echoed: { a: [1, 'é'] } });
    expect(answer).toEqual(
      await new InternalHttpClient(url, { clusterKey: KEY, dispatcher }).call('POST', '/internal/echo', { a: [1, 'é'] }),
    );
    expect(app.get(VectorClockService).now()).toEqual({
      clusterTime: { t: 6, i: 2 },
      configTime: { t: 5, i: 0 },
      topologyTime: { t: 2, i: 0 },
    });
    app.get(VectorClockService).advance({ configTime: { t: 9, i: 1 } });
    app.get(VectorClockService).tickClusterTime(9);
    await client({ gossip }).call('POST', '/internal/echo', {});
    expect(gossip.time.configTime).toEqual({ t: 9, i: 1 });
    expect(gossip.time.clusterTime).toEqual({ t: 9, i: 2 });
  });

  it("answers any other internal route through the app's pipeline: guard, controller, exception filter", async () => {
    const wire = client();
    expect(await wire.call('PUT', '/internal/things/x', { v: 1 })).toEqual({ stored: 'x' });
    expect(await wire.call('GET', '/internal/things/x')).toEqual({ v: 1 });
    await expect(wire.call('GET', '/internal/things/y')).rejects.toMatchObject({
      code: 'NOT_FOUND',
      message: 'no thing y',
      details: { name: 'y' },
    });
  });

  it("carries a handler's error intact, and an unexpected one as INTERNAL with a correlation id", async () => {
    const wire = client();
    await expect(wire.call('POST', '/internal/stale', {})).rejects.toMatchObject({
      code: 'STALE_CONFIG',
      message: 'behind',
      retryable: true,
      details: { ns: 'a.b' },
    });
    await expect(wire.call('POST', '/internal/crash', {})).rejects.toMatchObject({
      code: 'INTERNAL',
      message: expect.stringMatching(/^internal error; correlation id \S+$/),
    });
  });

  it('refuses an upgrade signed with another key, and the request then gets its own refusal over HTTP', async () => {
    const fallbacks: string[] = [];
    const stranger = client({ key: OTHER_KEY, wire: { onFallback: (_origin, reason) => fallbacks.push(reason) } });
    await expect(stranger.call('POST', '/internal/echo', {})).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
    expect(fallbacks).toEqual([expect.stringContaining('answered HTTP 401: internal request refused: signature does not match')]);
    const answer = await rawUpgrade(url, signRequest(OTHER_KEY, 'GET', WIRE_PATH, '', Date.now()));
    expect(answer).toMatch(/^HTTP\/1.1 401 /);
    expect(answer).toContain('"code":"UNAUTHORIZED"');
    expect(await rawUpgrade(url, signRequest(KEY, 'GET', WIRE_PATH, '', Date.now()))).toMatch(/^HTTP\/1.1 101 /);
  });

  it('answers each frame on an open connection that is signed with another key, or not at all, UNAUTHORIZED: directly and through the pipeline', async () => {
    const wire = new WireAgent({ clusterKey: KEY });
    agents.push(wire);
    const connection = wire.connectionTo(url)!;
    const forged = (method: string, path: string, body: string) => ({
      ...signRequest(OTHER_KEY, method, path, body, Date.now()),
      'content-type': 'application/json',
    });
    for (const [method, path, body] of [
      ['POST', '/internal/echo', '{"a":1}'],
      ['PUT', '/internal/things/z', '{"v":1}'],
    ] as const) {
      for (const headers of [forged(method, path, body), { 'content-type': 'application/json' }]) {
        const answer = await connection.request(method, path, headers, body, 1_000);
        expect([answer?.status, JSON.parse(answer!.text)]).toMatchObject([401, { error: { code: 'UNAUTHORIZED' } }]);
      }
    }
    await expect(client().call('GET', '/internal/things/z')).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('answers a frame whose head is malformed BAD_VALUE, and a ping at once, on the same connection', async () => {
    const wire = await rawWire(url);
    try {
      const heads = [
        { id: 5, method: 5, headers: [] },
        { id: 6, method: { toString: 1 }, path: '/internal/echo', headers: {} },
        { id: 7, method: 'BREW', path: '/internal/echo', headers: {} },
      ];
      for (const head of heads) {
        wire.socket.write(encodeFrame(head as unknown as WireRequestHead, ''));
        const bad = await wire.next();
        expect(bad.head).toMatchObject({ id: head.id, status: 400 });
        expect(JSON.parse(bad.body)).toMatchObject({ error: { code: 'BAD_VALUE', message: expect.stringContaining('bad wire frame') } });
      }
      wire.socket.write(encodeFrame({ id: 8, method: PING, path: WIRE_PATH, headers: {} }, ''));
      expect(await wire.next()).toEqual({ head: { id: 8, status: 200, headers: {} }, body: '' });
    } finally {
      wire.socket.destroy();
    }
  });

  it('survives a peer that resets its connection once it has asked for an upgrade, refused or taken', async () => {
    const { hostname, port } = new URL(url);
    for (const [path, headers] of [
      ['/elsewhere', {}],
      [WIRE_PATH, {}],
      [WIRE_PATH, signRequest(KEY, 'GET', WIRE_PATH, '', Date.now())],
    ] as const) {
      for (const waitForAnswer of [false, true]) {
        const socket = connect(Number(port), hostname);
        await once(socket, 'connect');
        const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`);
        socket.write(
          `GET ${path} HTTP/1.1\r\nhost: ${hostname}\r\nconnection: Upgrade\r\nupgrade: ${WIRE_PROTOCOL}\r\n${lines.join('')}\r\n`,
        );
        if (waitForAnswer) await once(socket, 'data');
        socket.resetAndDestroy();
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await client().call('POST', '/internal/echo', { n: 1 })).toEqual({ echoed: { n: 1 } });
  });

  it('answers a body over the limit DOCUMENT_TOO_LARGE for that request alone, as HTTP does', async () => {
    const wire = client();
    const held = wire.call('POST', '/internal/held', { n: 1 });
    await until(() => released.length === 1);
    // Just over the body limit, and far over the frame's (whose body is then dropped unread).
    for (const bytes of [MAX_BODY_BYTES + 10, 2 * MAX_BODY_BYTES]) {
      for (const path of ['/internal/echo', '/internal/things/big']) {
        await expect(wire.call(path.endsWith('big') ? 'PUT' : 'POST', path, 'x'.repeat(bytes))).rejects.toMatchObject({
          code: 'DOCUMENT_TOO_LARGE',
        });
      }
    }
    released[0]!();
    expect(await held).toEqual({ n: 1 });
    expect(await wire.call('POST', '/internal/echo', { n: 2 })).toEqual({ echoed: { n: 2 } });
  });

  it("fails an answer over the client's limit alone, and the connection goes on", async () => {
    const wire = client({ wire: { maxFrameBytes: 1_000 } });
    const held = wire.call('POST', '/internal/held', { n: 1 });
    await until(() => released.length === 1);
    await expect(wire.call('POST', '/internal/echo', 'y'.repeat(2_000))).rejects.toMatchObject({
      code: 'INTERNAL',
      message: expect.stringMatching(/the answer of \d+ bytes is over the limit of 1000$/),
    });
    released[0]!();
    expect(await held).toEqual({ n: 1 });
    expect(await wire.call('POST', '/internal/echo', { n: 2 })).toEqual({ echoed: { n: 2 } });
  });

  it('sends its requests over HTTP to a node that does not serve the wire, and asks it again a minute later', async () => {
    const plain = await startNode(released, { wire: false });
    try {
      let now = Date.now();
      const fallbacks: string[] = [];
      const wire = client({ url: plain.url, wire: { now: () => now, onFallback: (_origin, reason) => fallbacks.push(reason) } });
      expect(await wire.call('POST', '/internal/echo', { n: 1 })).toEqual({ echoed: { n: 1 } });
      // The node's own answers, not the refused upgrade's 404.
      await expect(wire.call('GET', '/internal/things/none')).rejects.toMatchObject({ code: 'NOT_FOUND', message: 'no thing none' });
      expect(fallbacks).toEqual([expect.stringContaining('answered HTTP 404')]);
      now += 61_000;
      expect(await wire.call('POST', '/internal/echo', { n: 2 })).toEqual({ echoed: { n: 2 } });
      expect(fallbacks).toHaveLength(2);
    } finally {
      await plain.app.close();
    }
  });

  it('closes a connection whose node goes silent, after a timeout and an unanswered ping, and opens another', async () => {
    const accepted: Socket[] = [];
    const silent = createServer((socket) => {
      accepted.push(socket);
      socket.once('data', () =>
        socket.write(`HTTP/1.1 101 Switching Protocols\r\nupgrade: ${WIRE_PROTOCOL}\r\nconnection: Upgrade\r\n\r\n`),
      );
      socket.on('error', () => undefined);
    });
    silent.listen(0, '127.0.0.1');
    await once(silent, 'listening');
    try {
      const node = `http://127.0.0.1:${(silent.address() as { port: number }).port}`;
      const wire = client({ url: node, timeoutMs: 100, wire: { pingTimeoutMs: 100 } });
      await expect(wire.call('POST', '/internal/echo', {})).rejects.toMatchObject({ code: 'NETWORK_TIMEOUT' });
      await until(() => accepted[0]!.destroyed || accepted[0]!.readableEnded);
      await expect(wire.call('POST', '/internal/echo', {})).rejects.toMatchObject({ code: 'NETWORK_TIMEOUT' });
      expect(accepted).toHaveLength(2);
    } finally {
      accepted.forEach((socket) => socket.destroy());
      silent.close();
    }
  });

  it('gives up opening a connection whose refusal never ends, within the connect timeout', async () => {
    const accepted: Socket[] = [];
    const stalling = createServer((socket) => {
      accepted.push(socket);
      socket.once('data', () => socket.write('HTTP/1.1 404 Not Found\r\ncontent-length: 100\r\n\r\n{"error":'));
      socket.on('error', () => undefined);
    });
    stalling.listen(0, '127.0.0.1');
    await once(stalling, 'listening');
    try {
      const node = `http://127.0.0.1:${(stalling.address() as { port: number }).port}`;
      const wire = client({ url: node, wire: { connectTimeoutMs: 100 } });
      await expect(wire.call('POST', '/internal/echo', {})).rejects.toMatchObject({
        code: 'NETWORK_TIMEOUT',
        message: expect.stringContaining('POST http://127.0.0.1:'),
      });
    } finally {
      accepted.forEach((socket) => socket.destroy());
      stalling.close();
    }
  });

  it('reaches a node at an IPv6 literal', async () => {
    const v6 = await startNode(released, { host: '::1' });
    try {
      expect(v6.url).toMatch(/^http:\/\/\[::1\]:\d+$/);
      expect(await client({ url: v6.url }).call('POST', '/internal/echo', { n: 6 })).toEqual({ echoed: { n: 6 } });
    } finally {
      await v6.app.close();
    }
  });

  it('matches answers to their requests when many are in flight and answered in another order', async () => {
    const wire = client();
    const answers = Promise.all([1, 2, 3, 4, 5].map((n) => wire.call('POST', '/internal/held', { n })));
    await until(() => released.length === 5);
    for (const release of released.splice(0).reverse()) release();
    expect(await answers).toEqual([1, 2, 3, 4, 5].map((n) => ({ n })));
  });

  it('fails the requests in flight with HOST_UNREACHABLE when the connection closes under them', async () => {
    const wire = client();
    const held = wire.call('POST', '/internal/held', { n: 1 });
    await until(() => released.length === 1);
    await agents[0]!.close();
    await expect(held).rejects.toMatchObject({ code: 'HOST_UNREACHABLE', details: { url } });
  });

  it('closes once the requests in flight are answered, or its grace is over; new requests are refused meanwhile', async () => {
    const wire = client();
    const held = wire.call('POST', '/internal/held', { n: 1 });
    await until(() => released.length === 1);
    let closed = false;
    const closing = agents[0]!.close(5_000).then(() => (closed = true));
    await expect(wire.call('POST', '/internal/echo', {})).rejects.toMatchObject({ code: 'SHUTDOWN_IN_PROGRESS' });
    expect(closed).toBe(false);
    released.splice(0)[0]!();
    expect(await held).toEqual({ n: 1 });
    await closing;

    const impatient = client();
    const late = impatient.call('POST', '/internal/held', { n: 2 });
    await until(() => released.length === 1);
    await agents[1]!.close(50);
    await expect(late).rejects.toMatchObject({ code: 'HOST_UNREACHABLE' });
  });

  it('answers NETWORK_TIMEOUT when a node does not answer in time, keeps the connection while the node answers its ping, and the late answer goes nowhere', async () => {
    const wire = client({ timeoutMs: 100 });
    await expect(wire.call('POST', '/internal/held', {})).rejects.toMatchObject({
      code: 'NETWORK_TIMEOUT',
      message: expect.stringContaining('timed out after 100 ms'),
    });
    const held = wire.call('POST', '/internal/held', { n: 4 });
    await until(() => released.length === 2);
    released.splice(0).forEach((release) => release());
    expect(await held).toEqual({ n: 4 });
    expect(await wire.call('POST', '/internal/echo', { n: 3 })).toEqual({ echoed: { n: 3 } });
  });

  it('answers HOST_UNREACHABLE for a node that is not listening', async () => {
    const wire = new WireAgent({ clusterKey: KEY });
    agents.push(wire);
    const gone = new InternalHttpClient('http://127.0.0.1:1', { clusterKey: KEY, dispatcher, wire });
    await expect(gone.call('POST', '/internal/echo', {})).rejects.toMatchObject({
      code: 'HOST_UNREACHABLE',
      details: { reason: 'ECONNREFUSED' },
    });
  });
});

/** A node serving the wire: hot routes (echo, held until released, stale, crash) and ThingsController. */
async function startNode(
  released: Array<() => void>,
  { port = 0, host = '127.0.0.1', wire = true }: { port?: number; host?: string; wire?: boolean } = {},
): Promise<{ app: NestFastifyApplication; url: string }> {
  const app = await NestFactory.create<NestFastifyApplication>(TestModule, new FastifyAdapter(), { rawBody: true, logger: false });
  app.useGlobalFilters(new TesseraExceptionFilter(logger));
  guardInternalRoutes(app.getHttpAdapter().getInstance(), app.get(VectorClockService), KEY);
  const routes = [
    { url: '/internal/echo', handle: (body: unknown) => ({ echoed: body }) },
    /** Answers once the test releases it, so requests can be held in flight. */
    { url: '/internal/held', handle: (body: unknown) => new Promise((resolve) => released.push(() => resolve(body))) },
    {
      url: '/internal/stale',
      handle: () => {
        throw new TesseraError('STALE_CONFIG', 'behind', { details: { ns: 'a.b' } });
      },
    },
    {
      url: '/internal/crash',
      handle: () => {
        throw new Error('boom');
      },
    },
  ];
  serveHotRoutes(app, routes, KEY, logger);
  if (wire) serveWire(app, routes, { clusterKey: KEY, logger, maxBodyBytes: MAX_BODY_BYTES });
  await app.listen({ port, host });
  const { port: listening } = app.getHttpServer().address() as { port: number };
  return { app, url: `http://${host.includes(':') ? `[${host}]` : host}:${listening}` };
}

describe('the internal wire at shutdown', () => {
  it('answers the frames in flight, refuses new ones with SHUTDOWN_IN_PROGRESS, then closes; clients reconnect to the node restarted', async () => {
    const released: Array<() => void> = [];
    const { app, url } = await startNode(released);
    const wire = new WireAgent({ clusterKey: KEY });
    const dispatcher = new Agent();
    try {
      const node = new InternalHttpClient(url, { clusterKey: KEY, dispatcher, wire });
      const held = node.call('POST', '/internal/held', { n: 1 });
      await until(() => released.length === 1);
      let closed = false;
      const closing = app.close().then(() => (closed = true));
      await expect(node.call('POST', '/internal/echo', {})).rejects.toMatchObject({ code: 'SHUTDOWN_IN_PROGRESS' });
      expect(closed).toBe(false);
      released[0]!();
      expect(await held).toEqual({ n: 1 });
      await closing;
      await expect(node.call('POST', '/internal/echo', {})).rejects.toMatchObject({ code: 'HOST_UNREACHABLE' });

      // The same client reconnects to the node started again at the same address.
      const restarted = await startNode(released, { port: Number(new URL(url).port) });
      try {
        expect(await node.call('POST', '/internal/echo', { n: 2 })).toEqual({ echoed: { n: 2 } });
      } finally {
        await restarted.app.close();
      }
    } finally {
      await wire.close();
      await dispatcher.close();
    }
  });
});

async function until(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 5));
  expect(condition()).toBe(true);
}

/** The first bytes a node answers to an upgrade request with `headers`. */
async function rawUpgrade(url: string, headers: { readonly [name: string]: string } | SignedHeaders): Promise<string> {
  const { connect } = await import('node:net');
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => {
      const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`);
      socket.write(
        `GET ${WIRE_PATH} HTTP/1.1\r\nhost: ${hostname}\r\nconnection: Upgrade\r\nupgrade: ${WIRE_PROTOCOL}\r\n${lines.join('')}\r\n`,
      );
    });
    socket.once('data', (chunk) => {
      socket.destroy();
      resolve(chunk.toString('utf8'));
    });
    socket.once('error', reject);
  });
}

/** A wire connection opened by hand, to send frames no client would. */
async function rawWire(url: string): Promise<{ socket: Socket; next: () => Promise<{ head: WireResponseHead; body: string }> }> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  await once(socket, 'connect');
  const lines = Object.entries(signRequest(KEY, 'GET', WIRE_PATH, '', Date.now())).map(([name, value]) => `${name}: ${value}\r\n`);
  socket.write(
    `GET ${WIRE_PATH} HTTP/1.1\r\nhost: ${hostname}\r\nconnection: Upgrade\r\nupgrade: ${WIRE_PROTOCOL}\r\n${lines.join('')}\r\n`,
  );
  const reader = new FrameReader<WireResponseHead>(1024 * 1024);
  const frames: Array<{ head: WireResponseHead; body: string }> = [];
  let upgraded = false;
  socket.on('data', (chunk: Buffer) => {
    if (!upgraded) {
      const end = chunk.indexOf('\r\n\r\n');
      expect(chunk.toString('utf8', 0, end)).toMatch(/^HTTP\/1.1 101 /);
      upgraded = true;
      chunk = chunk.subarray(end + 4);
    }
    for (const frame of reader.push(chunk)) if ('body' in frame) frames.push({ head: frame.head, body: frame.body.toString('utf8') });
  });
  return {
    socket,
    next: async () => {
      await until(() => frames.length > 0);
      return frames.shift()!;
    },
  };
}
