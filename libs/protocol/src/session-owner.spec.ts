import { describe, expect, it } from 'vitest';
import { clusterSessionId } from './session-owner.js';

const ID = '0e8a3d9c-1a7b-4c1e-9a53-0d6f2e9b8a10';
const OTHER = '5f1c2b3a-4d5e-4f60-8a7b-9c0d1e2f3a4b';

describe('clusterSessionId', () => {
  it("is one user's session for one id: the same each time, another for another user or id", () => {
    const own = clusterSessionId(ID, 'alice');
    expect(clusterSessionId(ID, 'alice')).toBe(own);
    expect(clusterSessionId(ID, 'bob')).not.toBe(own);
    expect(clusterSessionId(OTHER, 'alice')).not.toBe(own);
    expect(own).not.toBe(ID);
  });

  it('is an RFC 9562 version 8 UUID', () => {
    expect(clusterSessionId(ID, 'alice')).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });
});
