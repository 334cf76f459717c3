import { createHash, randomBytes, scrypt, timingSafeEqual } from 'node:crypto';

/**
 * scrypt's cost for passwords: N = 2^15, r = 8, p = 1 (32 MiB of memory per hash), 16 bytes of
 * salt, a 32-byte hash. A password is verified once per caller and node, then the principal
 * cache answers, so the cost falls on sign-ins, not on requests. Stored as
 * `scrypt$<N>$<r>$<p>$<salt>$<hash>` (base64url), so a hash made with other parameters still
 * verifies after they change.
 */
const SCRYPT = { N: 2 ** 15, r: 8, p: 1 } as const;
const SALT_BYTES = 16;
const HASH_BYTES = 32;
/** A password hash's parameters are read from the stored hash; these bound what is accepted. */
const MAX_N = 2 ** 20;

function scryptAsync(password: string, salt: Buffer, params: { N: number; r: number; p: number }): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(password.normalize('NFC'), salt, HASH_BYTES, { ...params, maxmem: 256 * params.N * params.r + 1024 * 1024 }, (error, key) =>
      error ? reject(error) : resolve(key),
    ),
  );
}

/** A salted, slow hash of `password` to store. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const hash = await scryptAsync(password, salt, SCRYPT);
  return ['scrypt', SCRYPT.N, SCRYPT.r, SCRYPT.p, salt.toString('base64url'), hash.toString('base64url')].join('$');
}

/** Whether `password` is the one `stored` was made from; false for a stored value it cannot read. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = stored.split('$');
  const params = { N: Number(n), r: Number(r), p: Number(p) };
  if (scheme !== 'scrypt' || salt === undefined || hash === undefined) return false;
  if (
    !Number.isInteger(params.N) ||
    params.N < 2 ||
    params.N > MAX_N ||
    !(params.r >= 1 && params.r <= 32 && params.p >= 1 && params.p <= 16)
  ) {
    return false;
  }
  const expected = Buffer.from(hash, 'base64url');
  const actual = await scryptAsync(password, Buffer.from(salt, 'base64url'), params);
  return expected.length === actual.length && timingSafeEqual(expected, actual);
}

/** The prefix of the API keys Tessera makes, so that secret scanners and people recognise one. */
export const API_KEY_PREFIX = 'tsk_';

/**
 * A new API key: `tsk_<id>_<secret>`, where the id (12 hex digits) names the key in lists and
 * the secret is 32 random bytes. Only its digest is stored; the key is shown once.
 */
export function newApiKey(): { id: string; key: string } {
  const id = randomBytes(6).toString('hex');
  return { id, key: `${API_KEY_PREFIX}${id}_${randomBytes(32).toString('base64url')}` };
}

/**
 * What is stored of an API key: its SHA-256. A key carries 256 random bits, so a fast digest is
 * as safe for it as a slow hash is for a password, and a lookup by digest costs microseconds.
 */
export function apiKeyDigest(key: string): Buffer {
  return createHash('sha256').update(key, 'utf8').digest();
}
