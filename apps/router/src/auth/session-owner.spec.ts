import { describe, expect, it } from 'vitest';
import { clusterSessionId } from '@tessera/protocol';
import { ownSessions } from './session-owner.js';

const alice = { user: 'alice', roles: [] };
const bob = { user: 'bob', roles: [] };
const ID = '0e8a3d9c-1a7b-4c1e-9a53-0d6f2e9b8a10';
const OTHER = '5f1c2b3a-4d5e-4f60-8a7b-9c0d1e2f3a4b';

describe('ownSessions', () => {
  it("makes a command's lsid and a session list's ids the caller's own", () => {
    const command = { filter: {}, lsid: { id: { $uuid: ID } } };
    ownSessions(command, alice);
    expect(command.lsid.id).toEqual({ $uuid: clusterSessionId(ID, 'alice') });
    const list = {
      ids: [
        { id: { $uuid: ID } },
        { id: { $binary: { base64: Buffer.from(OTHER.replaceAll('-', ''), 'hex').toString('base64'), subType: '04' } } },
      ],
    };
    ownSessions(list, bob);
    expect(list.ids.map((lsid) => lsid.id)).toEqual([{ $uuid: clusterSessionId(ID, 'bob') }, { $uuid: clusterSessionId(OTHER, 'bob') }]);
  });

  it("leaves what holds no UUID as sent, for the command's own check to refuse", () => {
    const bodies: unknown[] = [
      undefined,
      null,
      'text',
      { lsid: { id: 'not-a-uuid' } },
      { lsid: null },
      { ids: [null, { id: { $uuid: 'zz' } }] },
    ];
    const copies = bodies.map((body) => JSON.stringify(body));
    for (const body of bodies) ownSessions(body, alice);
    expect(bodies.map((body) => JSON.stringify(body))).toEqual(copies);
  });
});
