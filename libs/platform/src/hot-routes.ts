import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { verifyInternalRequest } from './cluster-auth.guard.js';
import { sendError } from './error.filter.js';
import { VectorClockService } from './vector-clock.service.js';

/**
 * A POST route of the data path that Fastify serves itself, outside Nest's per-request pipeline
 * (execution context, guards and interceptors consumers, pipes, response controller). Every
 * process on this machine wakes cold for each request, so a request's cost follows the code it
 * runs through: the data path keeps to the code its work needs. What Nest gives every route is
 * kept: an internal route (under `/internal/`, the rule every internal hook and error answer
 * follows) is verified as `ClusterAuthGuard` verifies, errors are answered as
 * `TesseraExceptionFilter` answers them, and the app's Fastify hooks (request id, metrics,
 * response signature) run as for any route.
 */
export interface HotRoute {
  /** Fastify's pattern, e.g. `/v1/:db/:coll/insert`. */
  readonly url: string;
  /** Answers the JSON body of the reply; throws a `TesseraError` (anything else is `INTERNAL`). */
  readonly handle: (body: unknown, params: Readonly<Record<string, string>>, request: HotRequest) => unknown;
}

/** What a hot route may know of its request besides the body and the path's parameters. */
export interface HotRequest {
  /** The body's length in bytes: over HTTP from `content-length` (undefined when absent), over the wire the frame's. */
  readonly bodyBytes: number | undefined;
  /** The HTTP request (absent over the wire), for what the node's own hooks learnt of it, such as its caller. */
  readonly http?: FastifyRequest;
}

/** Registers `routes` on the app's Fastify instance; call before the app listens. */
export function serveHotRoutes(app: NestFastifyApplication, routes: readonly HotRoute[], clusterKey: string, logger: Logger): void {
  const fastify = app.getHttpAdapter().getInstance();
  const clock = app.get(VectorClockService);
  for (const route of routes) {
    const internal = route.url.startsWith('/internal/');
    fastify.post(route.url, async (request: FastifyRequest & { rawBody?: Buffer }, reply) => {
      try {
        if (internal) verifyInternalRequest(request, clusterKey, clock);
        const length = Number(request.headers['content-length']);
        return await route.handle(request.body, request.params as Record<string, string>, {
          bodyBytes: Number.isFinite(length) ? length : undefined,
          http: request,
        });
      } catch (error) {
        sendError(request, reply, error, logger);
        return reply;
      }
    });
  }
}
