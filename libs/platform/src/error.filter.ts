import { type ArgumentsHost, Catch, type ExceptionFilter, HttpException } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { ERROR_CODES, type ErrorEnvelope, TesseraError, duplicateKeyFields } from '@tessera/core';
import { httpStatusFor } from '@tessera/protocol';

/**
 * The one place an error becomes an HTTP response. Internal routes answer
 * `{ error: { code, message, retryable, details } }`; public routes (`/v1/...`) answer MongoDB's
 * shape `{ ok: 0, code, codeName, errmsg, details }`. Unexpected errors become `INTERNAL` with
 * the request id as correlation id and no stack trace; the stack goes to the log.
 */
@Catch()
export class TesseraExceptionFilter implements ExceptionFilter {
  constructor(private readonly logger: Logger) {}

  catch(exception: unknown, host: ArgumentsHost): void {
    // GraphQL and socket.io errors are their transports' to render: returning nothing rethrows.
    if (host.getType() !== 'http') return;
    const http = host.switchToHttp();
    sendError(http.getRequest<FastifyRequest>(), http.getResponse<FastifyReply>(), exception, this.logger);
  }
}

/** Answers `exception` as the filter does, for routes served outside Nest too. */
export function sendError(request: FastifyRequest, reply: FastifyReply, exception: unknown, logger: Logger): void {
  const { status, body } = errorAnswer(exception, request, logger);
  // A refusal that says when to come back says it as HTTP does too.
  const retryAfter = exception instanceof TesseraError ? exception.details?.retryAfterSeconds : undefined;
  if (typeof retryAfter === 'number') void reply.header('retry-after', String(Math.ceil(retryAfter)));
  void reply.status(status).header('content-type', 'application/json; charset=utf-8').send(body);
}

/** What a request the handler of which threw `exception` is answered: the status and the body. */
export function errorAnswer(
  exception: unknown,
  request: { readonly id: string; readonly method: string; readonly url: string },
  logger: Logger,
): { status: number; body: unknown } {
  const error = toTesseraError(exception, request);
  const status = httpStatusFor(error.code);
  if (status >= 500 && error.code === 'INTERNAL') {
    logger.error({ reqId: request.id, err: exception, url: request.url }, 'unexpected error');
  }
  return { status, body: renderError(error.toEnvelope(), request.url) };
}

function toTesseraError(exception: unknown, request: { readonly id: string; readonly method: string; readonly url: string }): TesseraError {
  if (exception instanceof TesseraError) return exception;
  const status = statusOf(exception);
  const message = exception instanceof Error ? exception.message : String(exception);
  if (status === 404) {
    return new TesseraError('NOT_FOUND', `no route ${request.method} ${request.url.split('?')[0]}`);
  }
  if (status === 413) return new TesseraError('DOCUMENT_TOO_LARGE', `request body too large: ${message}`);
  if (status !== undefined && status >= 400 && status < 500) {
    return new TesseraError('BAD_VALUE', `bad request: ${message}`);
  }
  return new TesseraError('INTERNAL', `internal error; correlation id ${request.id}`, {
    details: { correlationId: request.id },
  });
}

function statusOf(exception: unknown): number | undefined {
  if (exception instanceof HttpException) return exception.getStatus();
  const status = (exception as { statusCode?: unknown } | null)?.statusCode;
  return typeof status === 'number' ? status : undefined;
}

/** Renders an envelope for the route's audience. */
export function renderError(envelope: ErrorEnvelope, url: string): unknown {
  if (url.startsWith('/v1/')) {
    const { code, codeName } = ERROR_CODES[envelope.code];
    return {
      ok: 0,
      code,
      codeName,
      errmsg: envelope.message,
      ...duplicateKeyFields(envelope),
      ...(envelope.errorLabels ? { errorLabels: envelope.errorLabels } : {}),
      ...(envelope.details ? { details: envelope.details } : {}),
    };
  }
  return { error: envelope };
}
