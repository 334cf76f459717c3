import { type CanActivate, type ExecutionContext, Inject, Injectable } from '@nestjs/common';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { TesseraError } from '@tessera/core';
import {
  DATE_HEADER,
  SIGNATURE_HEADER,
  SIGNED_HEADERS,
  signResponse,
  vectorTimeFromHeaders,
  vectorTimeHeaders,
  verifyRequest,
} from '@tessera/protocol';
import { renderError } from './error.filter.js';
import { SETTINGS } from './tokens.js';
import { VectorClockService } from './vector-clock.service.js';

/**
 * Guards internal routes: the request must carry a valid HMAC of itself made with the cluster
 * key. Anything else is refused with 401 `UNAUTHORIZED` before the handler runs. Only a
 * verified request may advance this node's vector clock.
 */
@Injectable()
export class ClusterAuthGuard implements CanActivate {
  constructor(
    @Inject(SETTINGS) private readonly settings: { TESSERA_CLUSTER_KEY: string },
    private readonly clock: VectorClockService,
  ) {}

  canActivate(context: ExecutionContext): boolean {
    verifyInternalRequest(
      context.switchToHttp().getRequest<FastifyRequest & { rawBody?: Buffer }>(),
      this.settings.TESSERA_CLUSTER_KEY,
      this.clock,
    );
    return true;
  }
}

/** What the check reads of a request, whether it came over HTTP or the internal wire. */
export interface InternalRequest {
  readonly method: string;
  /** The path with its query. */
  readonly url: string;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  /** The body as it came; none is an empty body. */
  readonly rawBody?: Buffer | undefined;
}

/**
 * The guard's check, for routes served outside Nest too: throws `UNAUTHORIZED` unless the
 * request carries a valid HMAC of itself made with the cluster key; then advances the clock
 * from the request's vector time.
 */
export function verifyInternalRequest(request: InternalRequest, clusterKey: string, clock: VectorClockService): void {
  const header = (name: string) => {
    const value = request.headers[name];
    return Array.isArray(value) ? value[0] : value;
  };
  const result = verifyRequest(
    clusterKey,
    {
      method: request.method,
      pathWithQuery: request.url,
      body: request.rawBody ?? '',
      date: header(DATE_HEADER),
      signature: header(SIGNATURE_HEADER),
      signed: Object.fromEntries(SIGNED_HEADERS.map((name) => [name, header(name)])),
    },
    Date.now(),
  );
  if (!result.ok) throw new TesseraError('UNAUTHORIZED', `internal request refused: ${result.reason}`);
  clock.advance(vectorTimeFromHeaders(request.headers));
}

/**
 * Refuses internal requests that carry no signature before their body is even parsed, so an
 * unauthenticated caller gets 401 whatever it sends (the guard then verifies the signature),
 * and puts this node's vector time on every internal response.
 */
export function guardInternalRoutes(fastify: FastifyInstance, clock: VectorClockService, clusterKey: string): void {
  fastify.addHook('onSend', async (request, reply, payload) => {
    if (!request.url.startsWith('/internal/')) return payload;
    const time = vectorTimeHeaders(clock.now());
    void reply.headers(time);
    const requestSignature = request.headers[SIGNATURE_HEADER];
    if (typeof requestSignature === 'string' && (typeof payload === 'string' || Buffer.isBuffer(payload))) {
      void reply.header(SIGNATURE_HEADER, signResponse(clusterKey, requestSignature, payload, time));
    }
    return payload;
  });
  fastify.addHook('onRequest', async (request, reply) => {
    if (!request.url.startsWith('/internal/')) return;
    if (request.headers[DATE_HEADER] !== undefined && request.headers[SIGNATURE_HEADER] !== undefined) return;
    const error = new TesseraError('UNAUTHORIZED', `internal request refused: missing ${DATE_HEADER} or ${SIGNATURE_HEADER} header`);
    await reply.status(401).send(renderError(error.toEnvelope(), request.url));
  });
}
