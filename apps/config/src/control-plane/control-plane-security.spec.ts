import { GraphQLError, buildSchema, parse, validate } from 'graphql';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { TesseraError } from '@tessera/core';
import { formatGraphqlError } from './graphql-errors.js';
import { allValidationRules } from './query-limits.js';

const silent = pino({ level: 'silent' });

describe('query limits', () => {
  const schema = buildSchema('type Query { node: Node } type Node { next: Node, value: Int }');
  const rules = allValidationRules({ TESSERA_GRAPHQL_MAX_DEPTH: 3, TESSERA_GRAPHQL_MAX_COST: 1_000 });

  it('accepts an operation within the depth limit', () => {
    expect(validate(schema, parse('{ node { next { value } } }'), rules)).toEqual([]);
  });

  it('reports an over-deep operation as a validation error instead of throwing', () => {
    const errors = validate(schema, parse('{ node { next { next { next { value } } } } }'), rules);
    expect(errors.map((e) => e.message)).toEqual([expect.stringMatching(/depth limit of 3/)]);
  });
});

describe('GraphQL errors', () => {
  it('carry the project error code, retryable and details', () => {
    const error = new TesseraError('NAMESPACE_NOT_FOUND', 'no such collection', { details: { ns: 'a.b' } });
    const wrapped = new GraphQLError(error.message, { originalError: error, path: ['collection'] });
    expect(formatGraphqlError({ message: error.message, path: ['collection'] }, wrapped, silent)).toEqual({
      message: 'no such collection',
      path: ['collection'],
      extensions: { code: 'NAMESPACE_NOT_FOUND', retryable: false, details: { ns: 'a.b' } },
    });
  });

  it('are BAD_VALUE for a request refused before it runs', () => {
    const refused = new GraphQLError('Cannot query field "nope" on type "Query".');
    const formatted = formatGraphqlError({ message: refused.message, extensions: { code: 'GRAPHQL_VALIDATION_FAILED' } }, refused, silent);
    expect(formatted.extensions).toMatchObject({ code: 'BAD_VALUE', details: { problem: 'GRAPHQL_VALIDATION_FAILED' } });
  });

  it('are INTERNAL with a correlation id and no stack for anything unexpected', () => {
    const crash = new GraphQLError('boom', { originalError: new TypeError('secret detail') });
    const formatted = formatGraphqlError({ message: 'boom' }, crash, silent);
    expect(formatted.extensions).toMatchObject({ code: 'INTERNAL', details: { correlationId: expect.any(String) } });
    expect(JSON.stringify(formatted)).not.toContain('secret detail');
  });
});
