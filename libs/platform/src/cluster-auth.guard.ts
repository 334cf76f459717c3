import { type CanActivate, type ExecutionContext, Inject, Injectable } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { TesseraError } from '@tessera/core';
import { DATE_HEADER, SIGNATURE_HEADER, verifyRequest } from '@tessera/protocol';
import { SETTINGS } from './tokens.js';

/**
 * Guards internal routes: the request must carry a valid HMAC of itself made with the cluster
 * key. Anything else is refused with 401 `UNAUTHORIZED` before the handler runs.
 */
@Injectable()
export class ClusterAuthGuard implements CanActivate {
  constructor(@Inject(SETTINGS) private readonly settings: { TESSERA_CLUSTER_KEY: string }) {}

  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<FastifyRequest & { rawBody?: Buffer }>();
    const header = (name: string) => {
      const value = request.headers[name];
      return Array.isArray(value) ? value[0] : value;
    };
    const result = verifyRequest(
      this.settings.TESSERA_CLUSTER_KEY,
      {
        method: request.method,
        pathWithQuery: request.url,
        body: request.rawBody ?? '',
        date: header(DATE_HEADER),
        signature: header(SIGNATURE_HEADER),
      },
      Date.now(),
    );
    if (!result.ok) throw new TesseraError('UNAUTHORIZED', `internal request refused: ${result.reason}`);
    return true;
  }
}
