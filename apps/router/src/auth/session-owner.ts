// Sessions belong to the user who uses them (`clusterSessionId`): the router replaces the ids a
// request names with the caller's own before the command runs, so the shards, the config server
// and the router's own session cache key sessions by one UUID as before.
import { type Principal, clusterSessionId } from '@tessera/protocol';
import { sessionUuidOf } from '../api/session-fields.js';

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
  if (id !== undefined) lsid.id = { $uuid: clusterSessionId(id, principal.user) };
}
