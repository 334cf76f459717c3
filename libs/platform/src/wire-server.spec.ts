import 'reflect-metadata';
import { Body, Controller, Get, Module, Param, Put, UseGuards } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import pino from 'pino';
import { Agent } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { TesseraError, type VectorTime } from '@tessera/core';
import {
  type ClockGossip,
  InternalHttpClient,
  type SignedHeaders,
  WIRE_PATH,
  WIRE_PROTOCOL,
  WireAgent,
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
  time: VectorTime = { configTime: { t: 5, i: 0 }, topologyTime: { t: 2, i: 0 } };
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

  const client = (options: { key?: string; timeoutMs?: number; gossip?: ClockGossip } = {}) => {
    const wire = new WireAgent({ clusterKey: options.key ?? KEY });
    agents.push(wire);
    return new InternalHttpClient(url, { clusterKey: options.key ?? KEY, dispatcher, wire, ...options });
  };

  beforeAll(async () => {
    ({ app, url } = await startNode(released));
  });
  afterEach(() => {
    for (const agent of agents.splice(0)) agent.close();
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
    expect(app.get(VectorClockService).now()).toEqual({ configTime: { t: 5, i: 0 }, topologyTime: { t: 2, i: 0 } });
    app.get(VectorClockService).advance({ configTime: { t: 9, i: 1 } });
    await client({ gossip }).call('POST', '/internal/echo', {});
    expect(gossip.time.configTime).toEqual({ t: 9, i: 1 });
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

  it('refuses the upgrade, and every message, signed with another key', async () => {
    await expect(client({ key: 'x'.repeat(32) }).call('POST', '/internal/echo', {})).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
    const answer = await rawUpgrade(url, signRequest('x'.repeat(32), 'GET', WIRE_PATH, '', Date.now()));
    expect(answer).toMatch(/^HTTP\/1.1 401 /);
    expect(answer).toContain('"code":"UNAUTHORIZED"');
    expect(await rawUpgrade(url, signRequest(KEY, 'GET', WIRE_PATH, '', Date.now()))).toMatch(/^HTTP\/1.1 101 /);
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
    agents[0]!.close();
    await expect(held).rejects.toMatchObject({ code: 'HOST_UNREACHABLE', details: { url } });
    released.splice(0).forEach((release) => release());
  });

  it('answers NETWORK_TIMEOUT when a node does not answer in time, and the late answer goes nowhere', async () => {
    const wire = client({ timeoutMs: 100 });
    await expect(wire.call('POST', '/internal/held', {})).rejects.toMatchObject({
      code: 'NETWORK_TIMEOUT',
      message: expect.stringContaining('timed out after 100 ms'),
    });
    released.splice(0).forEach((release) => release());
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
async function startNode(released: Array<() => void>, port = 0): Promise<{ app: NestFastifyApplication; url: string }> {
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
  serveWire(app, routes, KEY, logger, 1024 * 1024);
  await app.listen({ port, host: '127.0.0.1' });
  return { app, url: (await app.getUrl()).replace('[::1]', '127.0.0.1') };
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
      const restarted = await startNode(released, Number(new URL(url).port));
      try {
        expect(await node.call('POST', '/internal/echo', { n: 2 })).toEqual({ echoed: { n: 2 } });
      } finally {
        await restarted.app.close();
      }
    } finally {
      wire.close();
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
