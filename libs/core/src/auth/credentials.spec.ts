import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_AUTHORIZATION_LENGTH, parseAuthorization, validUserName } from './credentials.js';

const basic = (text: string) => `Basic ${Buffer.from(text, 'utf8').toString('base64')}`;

describe('parseAuthorization', () => {
  it('reads an API key and a user with a password, scheme names in any case', () => {
    expect(parseAuthorization('Bearer tsk_abc.DEF-123')).toEqual({ kind: 'apiKey', key: 'tsk_abc.DEF-123' });
    expect(parseAuthorization('bEARER k')).toEqual({ kind: 'apiKey', key: 'k' });
    expect(parseAuthorization(basic('ana:s3cret:with:colons'))).toEqual({ kind: 'password', user: 'ana', password: 's3cret:with:colons' });
    expect(parseAuthorization(basic('José:pässwörd ✓'))).toEqual({ kind: 'password', user: 'José', password: 'pässwörd ✓' });
    expect(parseAuthorization(undefined)).toEqual({ kind: 'none' });
  });

  it.each([
    ['an empty header', ''],
    ['a scheme alone', 'Bearer'],
    ['an empty key', 'Bearer '],
    ['a key with a space', 'Bearer a b'],
    ['a key with unicode', 'Bearer ключ'],
    ['an unknown scheme', 'Digest a=b'],
    ['Basic that is not base64', 'Basic %%%'],
    ['Basic base64 without padding', 'Basic YWJjOmQ'],
    ['Basic without a colon', basic('anapassword')],
    ['Basic with an empty user', basic(':password')],
    ['Basic with an empty password', basic('ana:')],
    ['Basic that is not UTF-8', `Basic ${Buffer.from([0x61, 0x3a, 0xff, 0xfe]).toString('base64')}`],
    ['a user name with a control character', basic('a\u0000b:pw')],
    ['a user name too long', basic(`${'u'.repeat(129)}:pw`)],
    ['a password too long', basic(`ana:${'p'.repeat(1025)}`)],
    ['a header too long', `Bearer ${'k'.repeat(MAX_AUTHORIZATION_LENGTH)}`],
  ])('refuses %s as malformed', (_, header) => {
    expect(parseAuthorization(header).kind).toBe('malformed');
  });

  it('refuses a repeated header', () => {
    expect(parseAuthorization(['Bearer a', 'Bearer b']).kind).toBe('malformed');
  });

  it('never throws, and reads a key or a password only from a header that spells one (fuzz)', () => {
    const header = fc.oneof(
      fc.string({ unit: 'grapheme', maxLength: 200 }),
      fc.string({ unit: 'binary', maxLength: 200 }),
      fc.string({ maxLength: 200 }).map((s) => `Bearer ${s}`),
      fc.string({ unit: 'binary', maxLength: 300 }).map(basic),
      fc.uint8Array({ maxLength: 300 }).map((bytes) => `Basic ${Buffer.from(bytes).toString('base64')}`),
      fc.nat({ max: 20_000 }).map((n) => `Bearer ${'x'.repeat(n)}`),
    );
    fc.assert(
      fc.property(header, (value) => {
        const credential = parseAuthorization(value);
        if (credential.kind === 'apiKey') expect(value).toBe(`${value.slice(0, 7)}${credential.key}`);
        if (credential.kind === 'password') {
          expect(validUserName(credential.user)).toBe(true);
          expect(Buffer.from(value.slice(6), 'base64').toString('utf8')).toBe(`${credential.user}:${credential.password}`);
        }
        expect(['none', 'apiKey', 'password', 'malformed']).toContain(credential.kind);
      }),
      { numRuns: 2_000 },
    );
  });
});
