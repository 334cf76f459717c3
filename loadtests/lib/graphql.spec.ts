import { readFileSync } from 'node:fs';
import { buildSchema, parse, validate } from 'graphql';
import { describe, expect, it } from 'vitest';
import { ControlPlaneError, OPERATIONS, type OperationName, graphqlBody, graphqlData, graphqlRequest } from './graphql.ts';

// schema.graphql is what the config server serves (a test in apps/config keeps them equal), so an
// operation that validates here is one the control plane accepts.
const schema = buildSchema(readFileSync(new URL('../../schema.graphql', import.meta.url), 'utf8'));

describe('the workloads’ GraphQL operations', () => {
  it.each(Object.keys(OPERATIONS) as OperationName[])('%s is valid against schema.graphql', (name) => {
    expect(validate(schema, parse(OPERATIONS[name])).map((e) => e.message)).toEqual([]);
  });

  it('sends the operation with its name and variables', () => {
    expect(JSON.parse(graphqlBody(graphqlRequest('dropCollection', { ns: 'a.b' })))).toEqual({
      query: OPERATIONS.dropCollection,
      variables: { ns: 'a.b' },
      operationName: 'DropCollection',
    });
  });

  it('returns data, and turns errors and HTTP failures into ControlPlaneError with the code', () => {
    expect(graphqlData('q', 200, { data: { x: 1 } })).toEqual({ x: 1 });
    expect(() => graphqlData('q', 200, { data: null, errors: [{ message: 'nope', extensions: { code: 'UNAUTHORIZED' } }] })).toThrow(
      'q: UNAUTHORIZED: nope',
    );
    expect(() => graphqlData('q', 502, 'Bad Gateway')).toThrow(ControlPlaneError);
    expect(() => graphqlData('q', 502, 'Bad Gateway')).toThrow('q: HTTP_502: Bad Gateway');
  });
});
