import { buildSchema, isObjectType } from 'graphql';
import { describe, expect, it } from 'vitest';
import type { ClusterTimeKeysService } from '../clock/cluster-time-keys.service.js';
import { ClusterTimeKeysResolver } from './cluster-time-keys.resolver.js';
import { printControlPlaneSchema } from './control-plane-schema.js';

describe('clusterTimeKeys', () => {
  it('answers each key id as a decimal string and its expiry as an ISO date, in the order the service gives (newest first)', async () => {
    const expiries = [
      { keyId: '7581627853870121986', expiresAt: new Date('2027-05-24T00:00:00Z') },
      { keyId: '7581627853870121985', expiresAt: new Date('2027-02-23T00:00:00Z') },
    ];
    const service = { expiries: async () => expiries } as unknown as ClusterTimeKeysService;
    expect(await new ClusterTimeKeysResolver(service).clusterTimeKeys()).toEqual([
      { keyId: '7581627853870121986', expiresAt: '2027-05-24T00:00:00.000Z' },
      { keyId: '7581627853870121985', expiresAt: '2027-02-23T00:00:00.000Z' },
    ]);
  });

  it('has a type with the id and expiry and no field for the secret', async () => {
    const type = buildSchema(await printControlPlaneSchema()).getType('ClusterTimeKey');
    expect(isObjectType(type)).toBe(true);
    if (!isObjectType(type)) return;
    expect(Object.keys(type.getFields()).sort()).toEqual(['expiresAt', 'keyId']);
    expect(String(type.getFields().keyId!.type)).toBe('String!');
  });
});
