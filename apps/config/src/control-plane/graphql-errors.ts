import { unwrapResolverError } from '@apollo/server/errors';
import { randomUUID } from 'node:crypto';
import { GraphQLError, type GraphQLFormattedError } from 'graphql';
import type { Logger } from 'pino';
import { TesseraError } from '@tessera/core';

/** Apollo's codes for a request refused before execution. */
const REQUEST_ERROR_CODES = new Set([
  'GRAPHQL_PARSE_FAILED',
  'GRAPHQL_VALIDATION_FAILED',
  'BAD_USER_INPUT',
  'BAD_REQUEST',
  'OPERATION_RESOLUTION_FAILURE',
  'PERSISTED_QUERY_NOT_FOUND',
  'PERSISTED_QUERY_NOT_SUPPORTED',
]);

/**
 * The one place an error becomes a GraphQL error: `extensions.code` is the project's error code
 * (the same closed set as the HTTP envelope), with `retryable` and `details`. A request the
 * server refuses before running it (syntax, validation, the depth and cost limits, a bad
 * variable) is `BAD_VALUE`. Anything unexpected is `INTERNAL` with a correlation id, logged with
 * its stack, which the client never sees.
 */
export function formatGraphqlError(formatted: GraphQLFormattedError, error: unknown, logger: Logger): GraphQLFormattedError {
  const original = unwrapResolverError(error);
  const where = { ...(formatted.locations ? { locations: formatted.locations } : {}), ...(formatted.path ? { path: formatted.path } : {}) };
  if (original instanceof TesseraError) {
    const envelope = original.toEnvelope();
    return {
      message: envelope.message,
      ...where,
      extensions: { code: envelope.code, retryable: envelope.retryable, ...(envelope.details ? { details: envelope.details } : {}) },
    };
  }
  const graphqlCode = formatted.extensions?.code;
  const refusedByApollo = typeof graphqlCode === 'string' && REQUEST_ERROR_CODES.has(graphqlCode);
  if (refusedByApollo || (original instanceof GraphQLError && original.originalError == null)) {
    return {
      message: formatted.message,
      ...where,
      extensions: {
        code: 'BAD_VALUE',
        retryable: false,
        details: { problem: typeof graphqlCode === 'string' ? graphqlCode : 'GRAPHQL_VALIDATION_FAILED' },
      },
    };
  }
  const correlationId = randomUUID();
  logger.error({ err: original, correlationId, path: formatted.path }, 'unexpected error in a GraphQL operation');
  return {
    message: `internal error; correlation id ${correlationId}`,
    ...where,
    extensions: { code: 'INTERNAL', retryable: false, details: { correlationId } },
  };
}
