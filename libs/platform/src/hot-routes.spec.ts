import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TesseraError } from '@tessera/core';
import { signRequest, vectorTimeHeaders } from '@tessera/protocol';
import { serveHotRoutes } from './hot-routes.js';
import { VectorClockService } from './vector-clock.service.js';

const KEY = 'k'.repeat(32);

@Module({ providers: [VectorClockService] })
class TestModule {}

describe('hot routes (served by Fastify outside Nest)', () => {
  let app: NestFastifyApplication;
  const calls: unknown[] = [];

  beforeAll(async () => {
    app = await NestFactory.create<NestFastifyApplication>(TestModule, new FastifyAdapter(), { rawBody: true, logger: false });
    const fail = (error: unknown) => () => {
      throw error;
    };
    serveHotRoutes(
      app,
      [
        { url: '/internal/echo', handle: (body) => (calls.push(body), { echoed: body }) },
        { url: '/internal/refuse', handle: fail(new TesseraError('STALE_CONFIG', 'behind', { details: { ns: 'a.b' } })) },
        { url: '/v1/:db/refuse', handle: fail(new TesseraError('BAD_VALUE', 'bad filter')) },
        { url: '/v1/:db/crash', handle: fail(new Error('boom')) },
        { url: '/v1/:db/params', handle: (_body, params) => params },
      ],
      KEY,
      pino({ level: 'silent' }),
    );
    await app.init();
    await app.getHttpAdapter().getInstance().ready();
  });
  afterAll(() => app.close());

  const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
    app.inject({ method: 'POST', url, payload: JSON.stringify(body), headers: { 'content-type': 'application/json', ...headers } });
  const signed = (url: string, body: unknown, key = KEY) => {
    const time = vectorTimeHeaders({ clusterTime: { t: 8, i: 4 }, configTime: { t: 7, i: 1 }, topologyTime: { t: 3, i: 2 } });
    return post(url, body, { ...time, ...signRequest(key, 'POST', url, JSON.stringify(body), Date.now(), time) });
  };

  it('answers a signed request with what the handler returns, and advances the clock from its vector time', async () => {
    const response = await signed('/internal/echo', { a: 1 });
    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual({ echoed: { a: 1 } });
    expect(app.get(VectorClockService).now()).toEqual({
      clusterTime: { t: 8, i: 4 },
      configTime: { t: 7, i: 1 },
      topologyTime: { t: 3, i: 2 },
    });
  });

  it('refuses a request signed with another key with 401, before the handler runs', async () => {
    const before = calls.length;
    const response = await signed('/internal/echo', { a: 2 }, 'x'.repeat(32));
    expect(response.statusCode).toBe(401);
    expect(response.json()).toMatchObject({ error: { code: 'UNAUTHORIZED', retryable: false } });
    expect(calls.length).toBe(before);
  });

  it("answers a handler's error as the exception filter does: the internal envelope, or MongoDB's shape under /v1", async () => {
    const internal = await signed('/internal/refuse', {});
    expect(internal.statusCode).toBe(409);
    expect(internal.json()).toMatchObject({ error: { code: 'STALE_CONFIG', message: 'behind', retryable: true, details: { ns: 'a.b' } } });
    const public_ = await post('/v1/db/refuse', {});
    expect(public_.statusCode).toBe(400);
    expect(public_.json()).toEqual({ ok: 0, code: 2, codeName: 'BadValue', errmsg: 'bad filter' });
  });

  it('answers an unexpected error as INTERNAL with the request id as correlation id, and no stack', async () => {
    const response = await post('/v1/db/crash', {});
    expect(response.statusCode).toBe(500);
    const body = response.json<{ codeName: string; details: { correlationId: string }; errmsg: string }>();
    expect(body.codeName).toBe('InternalError');
    expect(body.details.correlationId).toMatch(/\S/);
    expect(body.errmsg).toBe(`internal error; correlation id ${body.details.correlationId}`);
  });

  it("hands the handler the route's parameters", async () => {
    expect((await post('/v1/db1/params', {})).json()).toEqual({ db: 'db1' });
  });
});
