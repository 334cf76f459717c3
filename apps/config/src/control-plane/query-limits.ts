import { costLimitRule } from '@escape.tech/graphql-armor-cost-limit';
import { maxDepthRule } from '@escape.tech/graphql-armor-max-depth';
import { GraphQLError, type ValidationContext, type ValidationRule, specifiedRules } from 'graphql';
import type { ConfigSettings } from '../config.settings.js';

type LimitSettings = Pick<ConfigSettings, 'TESSERA_GRAPHQL_MAX_DEPTH' | 'TESSERA_GRAPHQL_MAX_COST'>;

/** Reports a refused limit as a validation error (graphql-armor would throw, which Apollo takes for a crash). */
const report = (limit: string) => ({
  propagateOnRejection: false,
  onReject: [
    (context: ValidationContext | null, error: GraphQLError) =>
      context?.reportError(new GraphQLError(error.message.replace(/^Syntax Error: /, ''), { extensions: { limit } })),
  ],
});

/**
 * Validation rules that refuse an operation before it runs: nesting deeper than
 * `TESSERA_GRAPHQL_MAX_DEPTH`, or an estimated cost above `TESSERA_GRAPHQL_MAX_COST` (each field
 * costs more the deeper it sits). Applied to HTTP operations and to graphql-ws subscriptions alike.
 */
export function queryLimitRules(settings: LimitSettings): ValidationRule[] {
  return [
    maxDepthRule({ n: settings.TESSERA_GRAPHQL_MAX_DEPTH, ignoreIntrospection: true, flattenFragments: true, ...report('depth') }),
    costLimitRule({ maxCost: settings.TESSERA_GRAPHQL_MAX_COST, ignoreIntrospection: true, flattenFragments: true, ...report('cost') }),
  ] as unknown as ValidationRule[];
}

/** Every rule of the GraphQL specification plus the limits. */
export function allValidationRules(settings: LimitSettings): ValidationRule[] {
  return [...specifiedRules, ...queryLimitRules(settings)];
}
