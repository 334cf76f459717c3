import { createHash } from 'node:crypto';
import type { Principal } from '@tessera/protocol';
import { sessionUuidOf } from '../api/session-fields.js';

/**
 * Sessions belong to the user who uses them, as MongoDB's `lsid.uid` makes them: a session is
 * its id and its user's uid (SHA-256 of `user@admin`; every Tessera user is in `admin`). The
 * router folds the pair into one UUID, the session's id in the cluster, so the shards, the config
 * server and the router's own session cache key sessions as before, and one user's session id
 * sent by another names a different session: its transaction, its retryable writes, its cursors
 * and its kill are out of the other's reach.
 */
const uids = new WeakMap<Principal, Buffer>();

function uidOf(principal: Principal): Buffer {
  let uid = uids.get(principal);
  if (uid === undefined) {
    uid = createHash('sha256').update(`${principal.user}@admin`).digest();
    uids.set(principal, uid);
  }
  return uid;
}

/**
 * The cluster's id of the session `id` of `principal`: the first 16 bytes of SHA-256(uid, id),
 * marked as an RFC 9562 version 8 (custom) UUID.
 */
export function ownedSessionId(id: string, principal: Principal): string {
  const digest = createHash('sha256').update(uidOf(principal)).update(id).digest();
  digest[6] = (digest[6]! & 0x0f) | 0x80;
  digest[8] = (digest[8]! & 0x3f) | 0x80;
  const hex = digest.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

interface SessionBody {
  lsid?: { id?: unknown };
  ids?: Array<{ id?: unknown }>;
}

/**
 * Replaces the session ids a public request's body names (a command's `lsid`, the `ids` of
 * endSessions, refreshSessions and killSessions) with the caller's own. An id that is not a UUID
 * is left as sent, for the command's own validation to refuse.
 */
export function ownSessions(body: unknown, principal: Principal): void {
  if (typeof body !== 'object' || body === null) return;
  const { lsid, ids } = body as SessionBody;
  if (typeof lsid === 'object' && lsid !== null) own(lsid, principal);
  if (Array.isArray(ids)) for (const entry of ids) if (typeof entry === 'object' && entry !== null) own(entry, principal);
}

function own(lsid: { id?: unknown }, principal: Principal): void {
  const id = sessionUuidOf(lsid.id);
  if (id !== undefined) lsid.id = { $uuid: ownedSessionId(id, principal) };
}
