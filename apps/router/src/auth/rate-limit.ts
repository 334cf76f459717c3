import rateLimit from '@fastify/rate-limit';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { TesseraError } from '@tessera/core';
import { sendError } from '@tessera/platform';
import { principalOfRequest } from './access-hooks.js';

/** Whose budget a request spends: its API key's (or password user's) once signed in, else its address's. */
function budgetOf(request: FastifyRequest): string {
  const principal = principalOfRequest(request);
  if (principal === undefined) return `address:${request.ip}`;
  return principal.keyId === undefined ? `user:${principal.user}` : `key:${principal.keyId}`;
}

/**
 * At most `perSecond` public API requests a second per key on this router (`@fastify/rate-limit`,
 * its in-memory store: each router counts its own). A request past it is answered 429 with
 * `Retry-After` before its body is read. Installed after the access hooks, so a signed-in caller
 * is counted by its key; without authorization, callers are counted by address.
 */
export async function installRateLimit(app: NestFastifyApplication, perSecond: number, logger: Logger): Promise<void> {
  await app.register(rateLimit as never, { global: false });
  const fastify = app.getHttpAdapter().getInstance();
  const check = fastify.createRateLimit({ max: perSecond, timeWindow: 1_000, keyGenerator: budgetOf });
  fastify.addHook('onRequest', async (request, reply) => {
    if (request.routeOptions.url?.startsWith('/v1/') !== true) return undefined;
    const limit = await check(request);
    if (limit.isAllowed || !limit.isExceeded) return undefined;
    const retryAfter = Math.max(1, limit.ttlInSeconds);
    void reply.header('retry-after', String(retryAfter));
    const error = new TesseraError('RATE_LIMITED', `more than ${perSecond} requests a second with this key; retry after ${retryAfter} s`, {
      details: { retryAfterSeconds: retryAfter },
    });
    sendError(request, reply, error, logger);
    return reply;
  });
}
