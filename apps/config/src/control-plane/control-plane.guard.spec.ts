import { Reflector } from '@nestjs/core';
import { ExecutionContextHost } from '@nestjs/core/helpers/execution-context-host.js';
import { describe, expect, it } from 'vitest';
import { type ErrorEnvelope, TesseraError } from '@tessera/core';
import { AdminResolver } from './admin.resolver.js';
import { ClusterTimeKeysResolver } from './cluster-time-keys.resolver.js';
import { ClusterResolver } from './cluster.resolver.js';
import type { ControlPlaneRole } from './control-plane-auth.js';
import { ControlPlaneGuard } from './control-plane.guard.js';

const guard = new ControlPlaneGuard(new Reflector());

type RootField = [resolver: abstract new (...args: never[]) => object, field: string, operation: 'query' | 'mutation'];
const clusterTimeKeys: RootField = [ClusterTimeKeysResolver, 'clusterTimeKeys', 'query'];
const cluster: RootField = [ClusterResolver, 'cluster', 'query'];
const addShard: RootField = [AdminResolver, 'addShard', 'mutation'];

/** Runs the guard as Nest does for the root field `field` of `resolver`, called with `role`'s token. */
function guardRoot([resolver, field, operation]: RootField, role: ControlPlaneRole | undefined): unknown {
  const handler = (resolver.prototype as Record<string, (...args: unknown[]) => unknown>)[field]!;
  const context = new ExecutionContextHost(
    [undefined, {}, { role }, { fieldName: field, operation: { operation } }],
    resolver as never,
    handler,
  );
  context.setType('graphql');
  try {
    return guard.canActivate(context);
  } catch (error) {
    return error instanceof TesseraError ? error.toEnvelope() : error;
  }
}

describe('the control plane guard', () => {
  it.each([
    ['an admin', 'a plain query', cluster, 'admin'],
    ['a viewer', 'a plain query', cluster, 'viewer'],
    ['an admin', 'a mutation', addShard, 'admin'],
    ['an admin', 'clusterTimeKeys (@AdminOnly)', clusterTimeKeys, 'admin'],
  ] as const)('lets %s run %s', (_who, _what, field, role) => {
    expect(guardRoot(field, role)).toBe(true);
  });

  it('refuses a viewer asking for clusterTimeKeys exactly as it refuses a viewer calling a mutation', () => {
    const refused = guardRoot(clusterTimeKeys, 'viewer') as ErrorEnvelope;
    const mutationRefused = guardRoot(addShard, 'viewer') as ErrorEnvelope;
    expect(refused).toMatchObject({ code: 'UNAUTHORIZED', retryable: false, details: { needs: 'admin', role: 'viewer' } });
    expect({ ...refused, message: '' }).toEqual({ ...mutationRefused, message: '' });
    expect(refused.message).toMatch(/needs the admin token/);
  });

  it.each([
    ['clusterTimeKeys', 'admin', clusterTimeKeys],
    ['a plain query', 'viewer', cluster],
  ] as const)('refuses %s without a token, saying the %s token is needed', (_what, needs, field) => {
    expect(guardRoot(field, undefined)).toMatchObject({ code: 'UNAUTHORIZED', details: { needs } });
  });
});
