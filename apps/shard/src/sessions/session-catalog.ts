import { Injectable } from '@nestjs/common';
import type { ImageKind, StatementResult } from '../documents/statement-history.js';

/**
 * What this process knows of a session's retryable writes (MongoDB's TransactionParticipant
 * state): loaded from the transactions table at the session's first checkout, then kept up to
 * date by the writes themselves, so a write needs no read before it runs.
 */
export interface SessionTxnState {
  /**
   * The session's highest txnNumber seen here. It may be ahead of the stored row: a txnNumber
   * whose statements all failed is started in memory only, as in MongoDB, and a restart forgets it.
   */
  txnNumber: number;
  /** The executed statements of `txnNumber`, by stmtId. */
  statements: Map<number, StatementResult>;
  /** The findAndModify image of `txnNumber`. */
  image: { kind: ImageKind; document: unknown } | undefined;
  /** History migrated in for `txnNumber` may miss statements (see INCOMPLETE_HISTORY_STMT_ID). */
  incompleteHistory: boolean;
}

/** A checked-out session; `checkIn` hands it to the next operation waiting for it. */
export interface CheckedOutSession {
  lsid: string;
  /** The session's state, when this process knows it. */
  state(): SessionTxnState | undefined;
  /** Replaces what this process knows of the session (undefined: reload it from the table next time). */
  setState(state: SessionTxnState | undefined): void;
  checkIn(): void;
}

/** Above this many known sessions, those not checked out are forgotten (they reload when used again). */
const MAX_KNOWN_SESSIONS = 100_000;

/**
 * MongoDB's session catalog: an operation on a session checks it out before it runs and checks
 * it in when it is done, and a second operation on the same session waits until then. So the
 * operations of one session run one at a time in this process, in the order they arrived, and
 * a retry that arrives while its first attempt still runs waits for it and is then answered
 * from the history the first attempt recorded. The catalog also keeps each session's state
 * (SessionTxnState); only this process writes its shard's transactions table, so that state
 * stays true as long as whatever else changes the table (migrated history, the reaper) does so
 * with the sessions checked out and has the catalog forget them (SessionRecords).
 */
@Injectable()
export class SessionCatalog {
  /** Per session, the turn of its last operation: it settles when that operation checks in. */
  private readonly lastTurn = new Map<string, Promise<void>>();
  private readonly states = new Map<string, SessionTxnState>();

  async checkOut(lsid: string): Promise<CheckedOutSession> {
    const previous = this.lastTurn.get(lsid);
    let release!: () => void;
    const turn = new Promise<void>((resolve) => (release = resolve));
    this.lastTurn.set(lsid, turn);
    if (previous !== undefined) await previous;
    let checkedIn = false;
    return {
      lsid,
      state: () => this.states.get(lsid),
      setState: (state) => {
        if (state === undefined) this.states.delete(lsid);
        else this.remember(lsid, state);
      },
      checkIn: () => {
        if (checkedIn) return;
        checkedIn = true;
        // Forget the turn once nobody waits: the map holds only sessions in use.
        if (this.lastTurn.get(lsid) === turn) this.lastTurn.delete(lsid);
        release();
      },
    };
  }

  /** Checks out several sessions in lsid order, so that two operations never each hold what the other waits for. */
  async checkOutAll(lsids: readonly string[]): Promise<Map<string, CheckedOutSession>> {
    const sessions = new Map<string, CheckedOutSession>();
    for (const lsid of [...new Set(lsids)].sort()) sessions.set(lsid, await this.checkOut(lsid));
    return sessions;
  }

  /** Forgets the state of sessions whose stored rows changed behind the writes' back. */
  forget(lsids: Iterable<string>): void {
    for (const lsid of lsids) this.states.delete(lsid);
  }

  /** How many sessions are checked out or waited for. */
  get activeSessions(): number {
    return this.lastTurn.size;
  }

  private remember(lsid: string, state: SessionTxnState): void {
    if (!this.states.has(lsid) && this.states.size >= MAX_KNOWN_SESSIONS) {
      for (const known of this.states.keys()) if (!this.lastTurn.has(known)) this.states.delete(known);
    }
    this.states.set(lsid, state);
  }
}
