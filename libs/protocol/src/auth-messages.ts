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

/** One entry of the audit log: who did what, from where, on what, and how it ended. */
export const auditEntrySchema = z.strictObject({
  user: z.string().max(256).nullable(),
  remoteAddress: z.string().max(256).nullable(),
  /** The node that saw it. */
  node: z.string().min(1).max(256),
  action: z.string().min(1).max(128),
  target: z.string().max(1_024).nullable(),
  outcome: z.enum(['ok', 'refused', 'failed']),
  details: z.record(z.string(), z.unknown()),
});
export type AuditEntry = z.infer<typeof auditEntrySchema>;

/** A node's audit entries for the config server's log (a router's refusals and admin commands). */
export const recordAuditRequestSchema = z.strictObject({ entries: z.array(auditEntrySchema).min(1).max(1_000) });
