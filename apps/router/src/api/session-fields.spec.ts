import { describe, expect, it } from 'vitest';
import { sessionOf } from './session-fields.js';

const ID = '0e8a3d9c-1a7b-4c1e-9a53-0d6f2e9b8a10';

describe('sessionOf', () => {
  it('reads an lsid given as $uuid or as canonical $binary of subtype 4', () => {
    expect(sessionOf({ lsid: { id: { $uuid: ID } } })).toEqual({ lsid: { id: ID } });
    const base64 = Buffer.from(ID.replaceAll('-', ''), 'hex').toString('base64');
    expect(sessionOf({ lsid: { id: { $binary: { base64, subType: '04' } } } })).toEqual({ lsid: { id: ID } });
  });

  it('reads a txnNumber given as a number or as $numberLong', () => {
    expect(sessionOf({ lsid: { id: { $uuid: ID } }, txnNumber: 7 })).toEqual({ lsid: { id: ID }, txnNumber: 7 });
    expect(sessionOf({ lsid: { id: { $uuid: ID } }, txnNumber: { $numberLong: '8' } })).toEqual({ lsid: { id: ID }, txnNumber: 8 });
  });

  it('has no session without an lsid', () => {
    expect(sessionOf({})).toBeUndefined();
  });

  it.each([
    ['a txnNumber without an lsid', { txnNumber: 1 }, 'INVALID_OPTIONS'],
    ['an id that is a string', { lsid: { id: ID } }, 'BAD_VALUE'],
    ['an id of another binary subtype', { lsid: { id: { $binary: { base64: 'AQI=', subType: '00' } } } }, 'BAD_VALUE'],
    ['no id', { lsid: {} }, 'BAD_VALUE'],
    ['a txnNumber beyond 2^53', { lsid: { id: { $uuid: ID } }, txnNumber: { $numberLong: '9007199254740993' } }, 'BAD_VALUE'],
  ])('refuses %s', (_what, body, code) => {
    expect(() => sessionOf(body as Parameters<typeof sessionOf>[0])).toThrowError(expect.objectContaining({ code }));
  });
});
