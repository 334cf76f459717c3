import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo';
import {
  type DocumentNode,
  GraphQLError,
  type GraphQLSchema,
  NoSchemaIntrospectionCustomRule,
  type ValidationRule,
  validate,
} from 'graphql';
import type { Logger } from 'pino';
import type { ConfigSettings } from '../config.settings.js';
import { roleOfToken } from './control-plane-auth.js';
import type { ControlPlaneContext } from './control-plane-context.js';
import { formatGraphqlError } from './graphql-errors.js';
import { allValidationRules, queryLimitRules } from './query-limits.js';

export const GRAPHQL_PATH = '/graphql';

/** What Nest passes the context function: a Fastify request over HTTP, graphql-ws's context over a socket. */
interface ContextSource {
  headers?: Record<string, string | string[] | undefined>;
  req?: { headers?: Record<string, string | string[] | undefined> };
  connectionParams?: Record<string, unknown>;
}

/**
 * Apollo (code first, schema built in memory and sorted; `schema.graphql` at the repository root
 * is its committed copy) on the config server's Fastify, with graphql-ws subscriptions on the same
 * port and path. Tokens come in the `Authorization` header over HTTP and in the `authorization`
 * connection parameter over graphql-ws, where a connection without a valid token is closed
 * (4403) before any operation.
 */
export function graphqlOptions(settings: ConfigSettings, logger: Logger): ApolloDriverConfig {
  const development = settings.TESSERA_GRAPHQL_DEVELOPMENT;
  const extraRules: ValidationRule[] = development ? [] : [NoSchemaIntrospectionCustomRule];
  const wsRules = [...allValidationRules(settings), ...extraRules];
  const format = (error: unknown) =>
    formatGraphqlError(error instanceof GraphQLError ? error.toJSON() : { message: String(error) }, error, logger);
  const roleOf = (source: ContextSource) => {
    const header = source.headers ?? source.req?.headers;
    if (header !== undefined) return roleOfToken(settings, header.authorization);
    return roleOfToken(settings, source.connectionParams?.authorization ?? source.connectionParams?.token);
  };
  return {
    driver: ApolloDriver,
    path: GRAPHQL_PATH,
    autoSchemaFile: true,
    sortSchema: true,
    introspection: development,
    graphiql: false,
    includeStacktraceInErrorResponses: false,
    validationRules: [...queryLimitRules(settings), ...extraRules],
    context: (source: ContextSource): ControlPlaneContext => ({ role: roleOf(source) }),
    formatError: (formatted, error) => formatGraphqlError(formatted, error, logger),
    subscriptions: {
      'graphql-ws': {
        path: GRAPHQL_PATH,
        onConnect: (ctx: { connectionParams?: Record<string, unknown> }) => roleOf(ctx) !== undefined,
        validate: (schema: GraphQLSchema, document: DocumentNode) => validate(schema, document, wsRules),
        onNext: (_ctx: unknown, _id: unknown, _payload: unknown, _args: unknown, result: { errors?: readonly unknown[] }) =>
          result.errors === undefined ? undefined : { ...result, errors: result.errors.map(format) },
        onError: (_ctx: unknown, _id: unknown, _payload: unknown, errors: readonly unknown[]) => errors.map(format),
      } as never,
    },
  };
}
