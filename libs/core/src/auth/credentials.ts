/**
 * What a request presents as its identity, read from its `Authorization` header. The parser is
 * the first code an unauthenticated caller reaches, so it is total: any string (or none) gives a
 * result, never an exception, and anything it does not fully understand is `malformed`, which
 * grants nothing.
 */

/** The longest `Authorization` header read; longer ones are malformed before any decoding. */
export const MAX_AUTHORIZATION_LENGTH = 4_096;
/** The longest user name, in UTF-16 code units. */
export const MAX_USER_NAME_LENGTH = 128;
/** The longest password, in UTF-16 code units. */
export const MAX_PASSWORD_LENGTH = 1_024;

/**
 * A parsed `Authorization` header: none given; an API key (`Bearer <key>`); a user and password
 * (`Basic base64(user:password)`, RFC 7617); or something else, with why it was refused.
 */
export type Credential =
  | { readonly kind: 'none' }
  | { readonly kind: 'apiKey'; readonly key: string }
  | { readonly kind: 'password'; readonly user: string; readonly password: string }
  | { readonly kind: 'malformed'; readonly reason: string };

/** Visible ASCII: what an API key may contain (RFC 6750's token68 is a subset). */
const KEY = /^[\x21-\x7e]+$/;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** The credential of an `Authorization` header value (a repeated header is malformed). */
export function parseAuthorization(header: string | readonly string[] | undefined): Credential {
  if (header === undefined) return { kind: 'none' };
  if (typeof header !== 'string') return malformed('more than one Authorization header');
  if (header.length > MAX_AUTHORIZATION_LENGTH) return malformed(`longer than ${MAX_AUTHORIZATION_LENGTH} characters`);
  const space = header.indexOf(' ');
  if (space <= 0) return malformed('expected "<scheme> <credentials>"');
  const scheme = header.slice(0, space).toLowerCase();
  const value = header.slice(space + 1);
  if (scheme === 'bearer') return KEY.test(value) ? { kind: 'apiKey', key: value } : malformed('a bearer key is visible ASCII');
  if (scheme === 'basic') return basic(value);
  return malformed('the scheme is neither Bearer nor Basic');
}

function basic(encoded: string): Credential {
  if (encoded.length % 4 !== 0 || !BASE64.test(encoded)) return malformed('Basic credentials are not base64');
  let decoded: string;
  try {
    const bytes = Uint8Array.from(atob(encoded), (c) => c.charCodeAt(0));
    decoded = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return malformed('Basic credentials are not base64 of UTF-8');
  }
  const colon = decoded.indexOf(':');
  if (colon <= 0) return malformed('Basic credentials are not "user:password"');
  const user = decoded.slice(0, colon);
  const password = decoded.slice(colon + 1);
  if (!validUserName(user)) return malformed('the user name is not a valid user name');
  if (password.length === 0 || password.length > MAX_PASSWORD_LENGTH) return malformed('the password is empty or too long');
  return { kind: 'password', user, password };
}

/**
 * Whether `name` may name a user: 1 to MAX_USER_NAME_LENGTH characters, none of them a control
 * character or a colon (Basic credentials split at the first colon).
 */
export function validUserName(name: string): boolean {
  return name.length > 0 && name.length <= MAX_USER_NAME_LENGTH && !/[\u0000-\u001f\u007f:]/.test(name) && name.trim() === name;
}

function malformed(reason: string): Credential {
  return { kind: 'malformed', reason };
}
