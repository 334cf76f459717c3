import { describe, expect, it } from 'vitest';
import type { ClusterTimeKeys } from '@tessera/protocol';
import { ClusterTimeKeyCache, clusterTimeHash } from './cluster-time-keys.js';

const SECRET = (n: number) => Buffer.alloc(20, n).toString('base64');
const INTERVAL = 100;
const at = (seconds: number) => new Date(seconds * 1000).toISOString();

/** A config server holding `keys`, counting the fetches. */
function configServer(keys: ClusterTimeKeys['keys']) {
  const server = { keys, fetches: 0 };
  const fetch = async () => {
    server.fetches++;
    return { keys: server.keys, rotationIntervalSecs: INTERVAL };
  };
  return { server, fetch };
}

async function cacheAt(seconds: { now: number }, keys: ClusterTimeKeys['keys']) {
  const { server, fetch } = configServer(keys);
  const cache = new ClusterTimeKeyCache(fetch, () => seconds.now * 1000);
  cache.sign({ t: 1, i: 1 });
  await new Promise((resolve) => setImmediate(resolve));
  return { cache, server };
}

describe('ClusterTimeKeyCache', () => {
  const two = [
    { keyId: '11', key: SECRET(1), expiresAt: at(1_100) },
    { keyId: '12', key: SECRET(2), expiresAt: at(1_200) },
  ];

  it('signs with the key that signs now, and its signature verifies', async () => {
    const clock = { now: 1_050 };
    const { cache } = await cacheAt(clock, two);
    const signed = cache.sign({ t: 1_050, i: 3 })!;
    expect(signed.signature.keyId).toBe('11');
    expect(signed.signature.hash).toEqual(clusterTimeHash(Buffer.alloc(20, 1), { t: 1_050, i: 3 }));
    await expect(cache.verify(signed)).resolves.toBeUndefined();
    // After the rotation the next key signs, and the old signature still verifies.
    clock.now = 1_150;
    expect(cache.sign({ t: 1_150, i: 1 })!.signature.keyId).toBe('12');
    await expect(cache.verify(signed)).resolves.toBeUndefined();
  });

  it('refuses a forged time (TimeProofMismatch), an unknown key and a key past its overlap (KeyNotFound)', async () => {
    const clock = { now: 1_050 };
    const { cache, server } = await cacheAt(clock, two);
    const signed = cache.sign({ t: 1_050, i: 3 })!;
    await expect(cache.verify({ ...signed, clusterTime: { t: 4_000_000_000, i: 1 } })).rejects.toMatchObject({
      code: 'TIME_PROOF_MISMATCH',
    });
    await expect(cache.verify({ ...signed, signature: { ...signed.signature, keyId: '99' } })).rejects.toMatchObject({
      code: 'NOT_FOUND',
    });
    // Key 11 stopped signing at 1100 and verifies until 1200.
    clock.now = 1_201;
    await expect(cache.verify(signed)).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect(server.fetches).toBeGreaterThanOrEqual(2);
  });

  it('fetches a key it does not know yet, and no more than once a second for unknown ones', async () => {
    const clock = { now: 1_050 };
    const { cache, server } = await cacheAt(clock, two.slice(0, 1));
    server.keys = two;
    const elsewhere = {
      clusterTime: { t: 1_050, i: 1 },
      signature: { hash: clusterTimeHash(Buffer.alloc(20, 2), { t: 1_050, i: 1 }), keyId: '12' },
    };
    clock.now = 1_052;
    await expect(cache.verify(elsewhere)).resolves.toBeUndefined();
    const fetches = server.fetches;
    const forged = { ...elsewhere, signature: { ...elsewhere.signature, keyId: '77' } };
    await expect(cache.verify(forged)).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(cache.verify(forged)).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect(server.fetches - fetches).toBeLessThanOrEqual(1);
  });

  it('signs nothing until it has a key', () => {
    const cache = new ClusterTimeKeyCache(() => new Promise(() => undefined));
    expect(cache.sign({ t: 1, i: 1 })).toBeUndefined();
  });
});
