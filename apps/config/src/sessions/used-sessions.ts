import type { UsedSession } from '@tessera/protocol';

/** A used session as the sessions table takes it: one per id, its last use a time. */
export interface SessionUse {
  id: string;
  lastUse: Date;
  openCursors: number;
  txnNumber: number | null;
}

/**
 * One use per session, sorted by id: a refresh may name a session twice (the upsert could not
 * touch one row twice in a statement), and every refresh locks its rows in the same order, so
 * two nodes refreshing the same sessions at once wait for each other instead of deadlocking.
 * Of two uses of a session, the later last use, the later-listed open cursors and the higher
 * txnNumber win.
 */
export function mergeUsedSessions(used: readonly UsedSession[]): SessionUse[] {
  const byId = new Map<string, SessionUse>();
  for (const use of used) {
    const lastUse = new Date(use.lastUse);
    const txnNumber = use.txnNumber ?? null;
    const known = byId.get(use.id);
    byId.set(use.id, {
      id: use.id,
      lastUse: known !== undefined && known.lastUse > lastUse ? known.lastUse : lastUse,
      openCursors: use.openCursors ?? 0,
      txnNumber: known?.txnNumber == null ? txnNumber : txnNumber === null ? known.txnNumber : Math.max(known.txnNumber, txnNumber),
    });
  }
  return [...byId.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}
