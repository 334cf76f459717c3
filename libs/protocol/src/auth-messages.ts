import { z } from 'zod';
import type { RoleGrant } from '@tessera/core';

/** Who a verified caller is: the user, the roles it holds, and the API key it used, if any. */
export interface Principal {
  readonly user: string;
  readonly roles: readonly RoleGrant[];
  /** The id of the API key it signed in with (absent for a password). */
  readonly keyId?: string;
}

/**
 * A node asks the config server who an `Authorization` header belongs to. The node caches the
 * answer until the users' `generation` moves; a refusal answers AUTHENTICATION_FAILED.
 */
export const authenticateRequestSchema = z.strictObject({
  authorization: z.string().max(8_192),
  /** The caller's address as the node saw it, for the audit log and the failed sign-in count. */
  remoteAddress: z.string().max(256).optional(),
  /** The node that asks, for the audit log. */
  node: z.string().min(1).max(256),
});
export type AuthenticateRequest = z.input<typeof authenticateRequestSchema>;

/** The answer to an authentication: the principal, and the generation of users it was read at. */
export interface AuthenticateResult {
  principal: Principal;
  generation: number;
}
