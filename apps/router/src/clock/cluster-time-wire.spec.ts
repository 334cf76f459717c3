import { describe, expect, it } from 'vitest';
import { clusterTimeFromWire, clusterTimeToWire } from './cluster-time-wire.js';

describe('$clusterTime on the public API', () => {
  const signed = { clusterTime: { t: 1_795_000_000, i: 4 }, signature: { hash: Buffer.alloc(20, 7), keyId: '7709876543210987654' } };

  it('reads back what it writes, in canonical Extended JSON', () => {
    const wire = clusterTimeToWire(signed);
    expect(wire).toEqual({
      clusterTime: { $timestamp: { t: 1_795_000_000, i: 4 } },
      signature: {
        hash: { $binary: { base64: Buffer.alloc(20, 7).toString('base64'), subType: '00' } },
        keyId: { $numberLong: '7709876543210987654' },
      },
    });
    expect(clusterTimeFromWire(JSON.parse(JSON.stringify(wire)))).toEqual(signed);
  });

  it('takes a relaxed keyId, and refuses malformed times and signatures with BadValue', () => {
    const wire = clusterTimeToWire(signed);
    expect(clusterTimeFromWire({ ...wire, signature: { ...wire.signature, keyId: 42 } }).signature.keyId).toBe('42');
    for (const bad of [
      null,
      { ...wire, clusterTime: { t: 1, i: 2 } },
      { ...wire, clusterTime: { $timestamp: { t: -1, i: 0 } } },
      { ...wire, signature: { keyId: '1' } },
      { ...wire, signature: { ...wire.signature, keyId: 'x' } },
    ]) {
      expect(() => clusterTimeFromWire(bad)).toThrow(expect.objectContaining({ code: 'BAD_VALUE' }));
    }
  });
});
