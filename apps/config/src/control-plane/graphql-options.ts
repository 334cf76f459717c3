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
import type { ControlPlaneContext } from './control-plane-context.js';
import { formatGraphqlError } from './graphql-errors.js';
import { allValidationRules, queryLimitRules } from './query-limits.js';

export const GRAPHQL_PATH = '/graphql';

/** What Nest passes the context function: a Fastify request over HTTP, graphql-ws's context over a socket. */
interface ContextSource {
  headers?: Record<string, string | string[] | undefined>;
  ip?: string;
  req?: { headers?: Record<string, string | string[] | undefined>; ip?: string };
  connectionParams?: Record<string, unknown>;
  extra?: { request?: { socket?: { remoteAddress?: string } } };
}

/** The caller's credentials and address: the `Authorization` header over HTTP, the connection parameters over graphql-ws. */
function callerOf(source: ContextSource): ControlPlaneContext {
  const headers = source.headers ?? source.req?.headers;
  if (headers !== undefined) return { authorization: headers.authorization, remoteAddress: source.ip ?? source.req?.ip };
  return {
    authorization: source.connectionParams?.authorization ?? source.connectionParams?.token,
    remoteAddress: source.extra?.request?.socket?.remoteAddress,
  };
}

/**
 * Apollo (code first, schema built in memory and sorted; `schema.graphql` at the repository root
 * is its committed copy) on the config server's Fastify, with graphql-ws subscriptions on the same
 * port and path. Credentials come in the `Authorization` header over HTTP and in the
 * `authorization` (or `token`) connection parameter over graphql-ws, where a connection without
 * any is closed (4403) before any operation; `ControlPlaneGuard` verifies them for each root field.
 */
export function graphqlOptions(settings: ConfigSettings, logger: Logger): ApolloDriverConfig {
  const development = settings.TESSERA_GRAPHQL_DEVELOPMENT;
  const extraRules: ValidationRule[] = development ? [] : [NoSchemaIntrospectionCustomRule];
  const wsRules = [...allValidationRules(settings), ...extraRules];
  const format = (error: unknown) =>
    formatGraphqlError(error instanceof GraphQLError ? error.toJSON() : { message: String(error) }, error, logger);
  return {
    driver: ApolloDriver,
    path: GRAPHQL_PATH,
    autoSchemaFile: true,
    sortSchema: true,
    introspection: development,
    graphiql: false,
    includeStacktraceInErrorResponses: false,
    validationRules: [...queryLimitRules(settings), ...extraRules],
    context: (source: ContextSource): ControlPlaneContext => callerOf(source),
    formatError: (formatted, error) => formatGraphqlError(formatted, error, logger),
    subscriptions: {
      'graphql-ws': {
        path: GRAPHQL_PATH,
        onConnect: (ctx: ContextSource) => {
          const { authorization } = callerOf(ctx);
          return typeof authorization === 'string' && authorization !== '';
        },
        validate: (schema: GraphQLSchema, document: DocumentNode) => validate(schema, document, wsRules),
        onNext: (_ctx: unknown, _id: unknown, _payload: unknown, _args: unknown, result: { errors?: readonly unknown[] }) =>
          result.errors === undefined ? undefined : { ...result, errors: result.errors.map(format) },
        onError: (_ctx: unknown, _id: unknown, _payload: unknown, errors: readonly unknown[]) => errors.map(format),
      } as never,
    },
  };
}
