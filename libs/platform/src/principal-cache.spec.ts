import { describe, expect, it } from 'vitest';
import { TesseraError } from '@tessera/core';
import type { AuthenticateResult } from '@tessera/protocol';
import { PrincipalCache } from './principal-cache.js';

/** A sign-in that knows `keys` (header → user) at `generation`, counting its calls. */
function fakeSignIn(keys: Record<string, string>, state: { generation: number; calls: number }) {
  return async (authorization: string): Promise<AuthenticateResult> => {
    state.calls++;
    await new Promise((resolve) => setTimeout(resolve, 1));
    const user = keys[authorization];
    if (user === undefined) throw new TesseraError('AUTHENTICATION_FAILED', 'Authentication failed.');
    return { principal: { user, roles: [] }, generation: state.generation };
  };
}

describe('PrincipalCache', () => {
  it('signs a header in once, sharing the first sign-in among concurrent requests', async () => {
    const state = { generation: 1, calls: 0 };
    const cache = new PrincipalCache(fakeSignIn({ 'Bearer a': 'ana' }, state));
    cache.observeGeneration(1);
    const principals = await Promise.all([1, 2, 3].map(() => cache.principalOf('Bearer a')));
    expect(principals.map((p) => p.user)).toEqual(['ana', 'ana', 'ana']);
    await cache.principalOf('Bearer a');
    expect(state.calls).toBe(1);
  });

  it('keeps no refusal, and tells a missing header from a wrong one', async () => {
    const state = { generation: 1, calls: 0 };
    const cache = new PrincipalCache(fakeSignIn({}, state));
    cache.observeGeneration(1);
    for (let i = 0; i < 2; i++) await expect(cache.principalOf('Bearer nope')).rejects.toMatchObject({ code: 'AUTHENTICATION_FAILED' });
    expect(state.calls).toBe(2);
    await expect(cache.principalOf(undefined)).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
    await expect(cache.principalOf(['Bearer a', 'Bearer b'])).rejects.toMatchObject({ code: 'AUTHENTICATION_FAILED' });
  });

  it('forgets everything when the generation moves, and keeps nothing verified at another generation', async () => {
    const state = { generation: 1, calls: 0 };
    const keys: Record<string, string> = { 'Bearer a': 'ana' };
    const cache = new PrincipalCache(fakeSignIn(keys, state));
    cache.observeGeneration(1);
    await cache.principalOf('Bearer a');
    delete keys['Bearer a'];
    state.generation = 2;
    expect((await cache.principalOf('Bearer a')).user).toBe('ana');
    cache.observeGeneration(2);
    await expect(cache.principalOf('Bearer a')).rejects.toMatchObject({ code: 'AUTHENTICATION_FAILED' });
    // An answer from a newer generation than the cache's moves the cache on, and is not kept.
    keys['Bearer b'] = 'bo';
    state.generation = 3;
    await cache.principalOf('Bearer b');
    await cache.principalOf('Bearer b');
    expect(state.calls).toBe(4);
    await cache.principalOf('Bearer b');
    expect(state.calls).toBe(4);
  });

  it("answers a connection's repeated header from its memo, never another header, and nothing once the generation moves", async () => {
    const state = { generation: 1, calls: 0 };
    const cache = new PrincipalCache(fakeSignIn({ 'Bearer a': 'ana', 'Bearer b': 'bea' }, state));
    cache.observeGeneration(1);
    const connection = {};
    expect(cache.cached('Bearer a', connection)).toBeUndefined();
    await cache.principalOf('Bearer a');
    expect(cache.cached('Bearer a', connection)?.user).toBe('ana');
    expect(cache.cached('Bearer a', connection)?.user).toBe('ana');
    // Another header on the same connection is its own: unknown until signed in.
    expect(cache.cached('Bearer b', connection)).toBeUndefined();
    await cache.principalOf('Bearer b');
    expect(cache.cached('Bearer b', connection)?.user).toBe('bea');
    // A dropped user's key: the generation moves, and the connection's memo answers nothing.
    cache.observeGeneration(2);
    expect(cache.cached('Bearer b', connection)).toBeUndefined();
    expect(cache.cached('Bearer b', {})).toBeUndefined();
  });
});
