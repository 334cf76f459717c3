import { createHash } from 'node:crypto';

/** SHA-256 of `user@admin` (MongoDB's `lsid.uid`; every Tessera user is in `admin`), by user, bounded. */
const uids = new Map<string, Buffer>();
const MAX_UIDS = 10_000;

function uidOf(user: string): Buffer {
  let uid = uids.get(user);
  if (uid === undefined) {
    uid = createHash('sha256').update(`${user}@admin`).digest();
    if (uids.size < MAX_UIDS) uids.set(user, uid);
  }
  return uid;
}

/**
 * The cluster's id of the session a client calls `id`, for `user`: sessions belong to the user
 * who uses them, as MongoDB's `lsid.uid` makes them, and a router that checks its callers folds
 * the pair into one UUID, the first 16 bytes of SHA-256(uid, id) marked as an RFC 9562 version 8
 * UUID. Shards, config servers and the control plane know sessions by it; one user's session id
 * sent by another is another session.
 */
export function clusterSessionId(id: string, user: string): string {
  const digest = createHash('sha256').update(uidOf(user)).update(id).digest();
  digest[6] = (digest[6]! & 0x0f) | 0x80;
  digest[8] = (digest[8]! & 0x3f) | 0x80;
  const hex = digest.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
