import { ExecutionContextHost } from '@nestjs/core/helpers/execution-context-host.js';
import { describe, expect, it } from 'vitest';
import { type ErrorEnvelope, type RoleGrant, TesseraError } from '@tessera/core';
import type { Principal } from '@tessera/protocol';
import type { AccessControlService } from '../access/access-control.service.js';
import type { ConfigAuthentication } from '../access/config-authentication.service.js';
import type { ControlPlaneContext } from './control-plane-context.js';
import { ControlPlaneGuard } from './control-plane.guard.js';

const USERS: Record<string, RoleGrant[]> = {
  'Bearer viewer': [{ role: 'clusterMonitor', db: 'admin' }],
  'Bearer manager': [{ role: 'clusterManager', db: 'admin' }],
  'Bearer shop': [{ role: 'dbOwner', db: 'shop' }],
};

/** A guard whose sign-ins know USERS, and whose user table is empty when `noUsers`. */
function guardWith(noUsers = false): ControlPlaneGuard {
  const authentication = {
    principalOf: async (authorization: unknown): Promise<Principal> => {
      if (authorization === undefined) throw new TesseraError('UNAUTHORIZED', 'this command requires authentication');
      const roles = USERS[authorization as string];
      if (roles === undefined) throw new TesseraError('AUTHENTICATION_FAILED', 'Authentication failed.');
      return { user: String(authorization), roles };
    },
  } as unknown as ConfigAuthentication;
  const access = { noUsers: async () => noUsers, audit: async () => undefined, node: 'config-test' } as unknown as AccessControlService;
  return new ControlPlaneGuard(authentication, access);
}

/** Runs the guard as Nest does for root field `Type.field` with `args`, called with `authorization` from `from`. */
async function guard(
  field: string,
  authorization?: string,
  args: Record<string, unknown> = {},
  from = '10.0.0.9',
  noUsers = false,
): Promise<unknown> {
  const [parent, fieldName] = field.split('.');
  const context: ControlPlaneContext = { authorization, remoteAddress: from };
  const host = new ExecutionContextHost([undefined, args, context, { parentType: { name: parent }, fieldName }]);
  host.setType('graphql');
  try {
    return await guardWith(noUsers).canActivate(host);
  } catch (error) {
    return error instanceof TesseraError ? error.toEnvelope() : error;
  }
}

describe('the control plane guard', () => {
  it.each([
    ['a clusterMonitor', 'a query', 'Query.cluster', 'Bearer viewer', {}],
    ['a clusterMonitor', 'a subscription', 'Subscription.chunkPlacementChanged', 'Bearer viewer', {}],
    ['a clusterManager', 'a balancer mutation', 'Mutation.setBalancerState', 'Bearer manager', {}],
    ['a clusterManager', 'moveChunk anywhere', 'Mutation.moveChunk', 'Bearer manager', { ns: 'any.thing' }],
    ['a dbOwner', 'dropCollection in its database', 'Mutation.dropCollection', 'Bearer shop', { ns: 'shop.orders' }],
    ['anyone signed in', 'whoAmI', 'Query.whoAmI', 'Bearer shop', {}],
  ] as const)('lets %s run %s', async (_who, _what, field, authorization, args) => {
    expect(await guard(field, authorization, args)).toBe(true);
  });

  it.each([
    ['a clusterMonitor', 'a mutation', 'Mutation.setBalancerState', 'Bearer viewer', {}],
    ['a clusterMonitor', 'the signing keys', 'Query.clusterTimeKeys', 'Bearer viewer', {}],
    ['a clusterManager', 'user management', 'Mutation.createUser', 'Bearer manager', {}],
    ['a dbOwner', 'dropCollection elsewhere', 'Mutation.dropCollection', 'Bearer shop', { ns: 'bank.accounts' }],
    ['a dbOwner', 'a cluster query', 'Query.cluster', 'Bearer shop', {}],
  ] as const)('refuses %s %s with FORBIDDEN', async (_who, _what, field, authorization, args) => {
    const refused = (await guard(field, authorization, args)) as ErrorEnvelope;
    expect(refused).toMatchObject({ code: 'FORBIDDEN', retryable: false });
    expect(refused.message).toMatch(/^not authorized on /);
  });

  it('refuses a caller without credentials as UNAUTHORIZED, and wrong ones as AUTHENTICATION_FAILED', async () => {
    expect(await guard('Query.cluster')).toMatchObject({ code: 'UNAUTHORIZED' });
    expect(await guard('Query.cluster', 'Bearer nobody')).toMatchObject({ code: 'AUTHENTICATION_FAILED' });
  });

  it('refuses a field no access rule names', async () => {
    expect(await guard('Query.noSuchField', 'Bearer viewer')).toMatchObject({ code: 'FORBIDDEN' });
  });

  it('lets createUser through without credentials only from 127.0.0.1 while no user exists (the localhost exception)', async () => {
    expect(await guard('Mutation.createUser', undefined, {}, '127.0.0.1', true)).toBe(true);
    expect(await guard('Mutation.createUser', undefined, {}, '10.0.0.9', true)).toMatchObject({ code: 'UNAUTHORIZED' });
    expect(await guard('Mutation.createUser', undefined, {}, '127.0.0.1', false)).toMatchObject({ code: 'UNAUTHORIZED' });
    expect(await guard('Mutation.dropUser', undefined, {}, '127.0.0.1', true)).toMatchObject({ code: 'UNAUTHORIZED' });
  });
});
