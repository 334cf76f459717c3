import { timingSafeEqual } from 'node:crypto';
import { TesseraError } from '@tessera/core';
import type { ConfigSettings } from '../config.settings.js';

/** Who a control-plane client is: admins may change the cluster, viewers may only look. */
export type ControlPlaneRole = 'admin' | 'viewer';

/**
 * The role a bearer token grants: the admin token grants `admin`, the viewer token `viewer`,
 * anything else nothing. Compared in constant time. `Bearer ` is optional.
 */
export function roleOfToken(
  settings: Pick<ConfigSettings, 'TESSERA_ADMIN_TOKEN' | 'TESSERA_VIEWER_TOKEN'>,
  presented: unknown,
): ControlPlaneRole | undefined {
  if (typeof presented !== 'string' || presented === '') return undefined;
  const token = presented.replace(/^Bearer\s+/i, '');
  if (matches(settings.TESSERA_ADMIN_TOKEN, token)) return 'admin';
  if (matches(settings.TESSERA_VIEWER_TOKEN, token)) return 'viewer';
  return undefined;
}

/**
 * What a root field asks: `read` (queries and subscriptions) needs a viewer or admin token;
 * `change` (mutations) and `adminRead` (queries marked `@AdminOnly()`) need the admin token.
 */
export type ControlPlaneAccess = 'read' | 'change' | 'adminRead';

/** Throws `UNAUTHORIZED` unless `role` may do `what`. */
export function assertAllowed(role: ControlPlaneRole | undefined, what: ControlPlaneAccess): void {
  const needs: ControlPlaneRole = what === 'read' ? 'viewer' : 'admin';
  if (role === undefined) {
    throw new TesseraError('UNAUTHORIZED', 'the control plane needs a viewer or admin token (Authorization: Bearer <token>)', {
      details: { needs },
    });
  }
  if (needs === 'admin' && role !== 'admin') {
    const asking = what === 'change' ? 'mutations need' : 'this query needs';
    throw new TesseraError('UNAUTHORIZED', `${asking} the admin token; the token given is a viewer token`, {
      details: { needs: 'admin', role },
    });
  }
}

function matches(expected: string | undefined, token: string): boolean {
  if (expected === undefined) return false;
  const a = Buffer.from(expected);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}
