import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Internal requests prove knowledge of the shared cluster key (`TESSERA_CLUSTER_KEY`) with an
 * HMAC-SHA256 over the method, the path with its query, a timestamp, the vector clock headers
 * (so nobody on the way can push a node's clock forward) and then the body. The key itself
 * never travels. A signature older or newer than `MAX_CLOCK_SKEW_MS` is refused, which
 * bounds how long a captured request can be replayed.
 */
export const SIGNATURE_HEADER = 'x-tessera-signature';
export const DATE_HEADER = 'x-tessera-date';
export const MAX_CLOCK_SKEW_MS = 5 * 60_000;
/** The shortest cluster key accepted: 32 characters, e.g. 16 random bytes in hex. */
export const MIN_CLUSTER_KEY_LENGTH = 32;

export interface SignedHeaders {
  [DATE_HEADER]: string;
  [SIGNATURE_HEADER]: string;
}

/** Headers whose values the signature covers besides method, path, date and body. */
export const SIGNED_HEADERS = ['x-tessera-cluster-time', 'x-tessera-config-time', 'x-tessera-topology-time'] as const;
export type SignedHeaderValues = Partial<Record<(typeof SIGNED_HEADERS)[number], string>>;

/**
 * The HMAC of one message: the fields, one per line, then the body as sent. The body comes last
 * and no field holds a newline (HTTP forbids them in the request line and header values), so no
 * two messages read alike; the body goes through the HMAC once, with no separate hash of it.
 */
function mac(
  key: string,
  method: string,
  pathWithQuery: string,
  date: string,
  body: Uint8Array | string,
  signed: SignedHeaderValues,
): Buffer {
  const headers = SIGNED_HEADERS.map((name) => `${name}:${signed[name] ?? ''}`).join('\n');
  return createHmac('sha256', key).update(`${method.toUpperCase()}\n${pathWithQuery}\n${date}\n${headers}\n`).update(body).digest();
}

/** Returns the headers that authenticate one internal request. */
export function signRequest(
  key: string,
  method: string,
  pathWithQuery: string,
  body: Uint8Array | string,
  nowMs: number,
  signed: SignedHeaderValues = {},
): SignedHeaders {
  const date = String(nowMs);
  const signature = mac(key, method, pathWithQuery, date, body, signed).toString('hex');
  return { [DATE_HEADER]: date, [SIGNATURE_HEADER]: signature };
}

export type VerifyResult = { ok: true } | { ok: false; reason: string };

/** Checks an internal request's signature; the reason says what was missing or wrong. */
export function verifyRequest(
  key: string,
  request: {
    method: string;
    pathWithQuery: string;
    body: Uint8Array | string;
    date?: string;
    signature?: string;
    signed?: SignedHeaderValues;
  },
  nowMs: number,
): VerifyResult {
  if (request.date === undefined || request.signature === undefined) {
    return { ok: false, reason: `missing ${DATE_HEADER} or ${SIGNATURE_HEADER} header` };
  }
  const sentAt = Number(request.date);
  if (!Number.isFinite(sentAt)) return { ok: false, reason: `${DATE_HEADER} is not a number` };
  if (Math.abs(nowMs - sentAt) > MAX_CLOCK_SKEW_MS) {
    return { ok: false, reason: `${DATE_HEADER} is more than ${MAX_CLOCK_SKEW_MS / 1000}s away from this node's clock` };
  }
  const expected = mac(key, request.method, request.pathWithQuery, request.date, request.body, request.signed ?? {});
  const given = Buffer.from(request.signature, 'hex');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    return { ok: false, reason: 'signature does not match: wrong cluster key or altered request' };
  }
  return { ok: true };
}

/**
 * The signature of an internal response: an HMAC over the request's signature (so a response
 * cannot be replayed for another request), the response body and its vector clock headers. A
 * client advances its clock only from responses whose signature checks.
 */
export function signResponse(key: string, requestSignature: string, body: Uint8Array | string, signed: SignedHeaderValues): string {
  return mac(key, 'RESPONSE', requestSignature, '', body, signed).toString('hex');
}

/** True when `signature` is the response signature `signResponse` would make. */
export function verifyResponse(
  key: string,
  requestSignature: string,
  body: Uint8Array | string,
  signed: SignedHeaderValues,
  signature: string | undefined,
): boolean {
  if (signature === undefined) return false;
  const expected = mac(key, 'RESPONSE', requestSignature, '', body, signed);
  const given = Buffer.from(signature, 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected);
}
