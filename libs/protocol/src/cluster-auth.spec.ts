import { describe, expect, it } from 'vitest';
import {
  DATE_HEADER,
  MAX_CLOCK_SKEW_MS,
  SIGNATURE_HEADER,
  signRequest,
  signResponse,
  verifyRequest,
  verifyResponse,
} from './cluster-auth.js';

const key = 'k'.repeat(64);
const now = 1_800_000_000_000;

function signed(overrides: Partial<{ method: string; pathWithQuery: string; body: string }> = {}, signedWith = key) {
  const request = { method: 'POST', pathWithQuery: '/internal/shards?x=1', body: '{"name":"a"}', ...overrides };
  const headers = signRequest(signedWith, 'POST', '/internal/shards?x=1', '{"name":"a"}', now);
  return { ...request, date: headers[DATE_HEADER], signature: headers[SIGNATURE_HEADER] };
}

describe('internal request signatures', () => {
  it('accept the request exactly as it was signed', () => {
    expect(verifyRequest(key, signed(), now + 1_000)).toEqual({ ok: true });
  });

  it.each([
    ['another method', { method: 'DELETE' }],
    ['another path', { pathWithQuery: '/internal/shards?x=2' }],
    ['another body', { body: '{"name":"b"}' }],
  ])('refuse %s than was signed', (_, change) => {
    expect(verifyRequest(key, signed(change), now)).toMatchObject({
      ok: false,
      reason: expect.stringContaining('signature does not match'),
    });
  });

  /** A request signed with vector clock headers `time`; the test gives the headers it arrives with. */
  const signedWithClock = (time: Record<string, string>) => {
    const headers = signRequest(key, 'POST', '/internal/x', '', now, time);
    return { method: 'POST', pathWithQuery: '/internal/x', body: '', date: headers[DATE_HEADER], signature: headers[SIGNATURE_HEADER] };
  };

  it('refuse a request whose vector clock headers were changed after signing', () => {
    const request = signedWithClock({ 'x-tessera-config-time': '10,1' });
    expect(verifyRequest(key, { ...request, signed: { 'x-tessera-config-time': '10,1' } }, now)).toEqual({ ok: true });
    expect(verifyRequest(key, { ...request, signed: { 'x-tessera-config-time': '4000000000,1' } }, now).ok).toBe(false);
  });

  it('refuse a request whose ClusterTime header was added or changed after signing', () => {
    const time = { 'x-tessera-cluster-time': '10,2' };
    const request = signedWithClock(time);
    expect(verifyRequest(key, { ...request, signed: time }, now)).toEqual({ ok: true });
    expect(verifyRequest(key, { ...request, signed: { 'x-tessera-cluster-time': '4000000000,1' } }, now).ok).toBe(false);
    expect(verifyRequest(key, { ...request, signed: {} }, now).ok).toBe(false);
  });

  it('refuse a signature made with another key', () => {
    expect(verifyRequest(key, signed({}, 'o'.repeat(64)), now).ok).toBe(false);
  });

  it('refuse a request older or newer than the allowed clock skew', () => {
    expect(verifyRequest(key, signed(), now + MAX_CLOCK_SKEW_MS + 1)).toMatchObject({
      ok: false,
      reason: expect.stringContaining(DATE_HEADER),
    });
    expect(verifyRequest(key, signed(), now - MAX_CLOCK_SKEW_MS - 1).ok).toBe(false);
  });

  it('refuse a request without the headers, or with a malformed signature', () => {
    expect(verifyRequest(key, { method: 'GET', pathWithQuery: '/', body: '' }, now)).toMatchObject({
      ok: false,
      reason: expect.stringContaining('missing'),
    });
    expect(verifyRequest(key, { ...signed(), signature: 'zz' }, now).ok).toBe(false);
  });
});

describe('internal response signatures', () => {
  const time = { 'x-tessera-config-time': '10,1', 'x-tessera-topology-time': '9,1' };

  it('verify for the request they answer, with the body and clock headers as sent', () => {
    const signature = signResponse(key, 'req-sig', '{"ok":1}', time);
    expect(verifyResponse(key, 'req-sig', '{"ok":1}', time, signature)).toBe(true);
  });

  it('do not verify for another request, another body, moved clock headers, another key or no signature', () => {
    const signature = signResponse(key, 'req-sig', '{"ok":1}', time);
    expect(verifyResponse(key, 'other-req', '{"ok":1}', time, signature)).toBe(false);
    expect(verifyResponse(key, 'req-sig', '{"ok":2}', time, signature)).toBe(false);
    expect(verifyResponse(key, 'req-sig', '{"ok":1}', { ...time, 'x-tessera-config-time': '4000000000,1' }, signature)).toBe(false);
    expect(verifyResponse('o'.repeat(64), 'req-sig', '{"ok":1}', time, signature)).toBe(false);
    expect(verifyResponse(key, 'req-sig', '{"ok":1}', time, undefined)).toBe(false);
  });
});
