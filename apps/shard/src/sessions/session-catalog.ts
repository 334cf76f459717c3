import { Injectable } from '@nestjs/common';

/** A checked-out session; `checkIn` hands it to the next operation waiting for it. */
export interface CheckedOutSession {
  lsid: string;
  checkIn(): void;
}

/**
 * MongoDB's session catalog, reduced to its checkout: an operation on a session checks it out
 * before it runs and checks it in when it is done, and a second operation on the same session
 * waits until then. So the operations of one session run one at a time in this process, in
 * the order they arrived, and a retry that arrives while its first attempt still runs waits
 * for it and is then answered from the history the first attempt recorded.
 */
@Injectable()
export class SessionCatalog {
  /** Per session, the turn of its last operation: it settles when that operation checks in. */
  private readonly lastTurn = new Map<string, Promise<void>>();

  async checkOut(lsid: string): Promise<CheckedOutSession> {
    const previous = this.lastTurn.get(lsid);
    let release!: () => void;
    const turn = new Promise<void>((resolve) => (release = resolve));
    this.lastTurn.set(lsid, turn);
    if (previous !== undefined) await previous;
    let checkedIn = false;
    return {
      lsid,
      checkIn: () => {
        if (checkedIn) return;
        checkedIn = true;
        // Forget the session once nobody waits: the map holds only sessions in use.
        if (this.lastTurn.get(lsid) === turn) this.lastTurn.delete(lsid);
        release();
      },
    };
  }

  /** How many sessions are checked out or waited for. */
  get activeSessions(): number {
    return this.lastTurn.size;
  }
}
