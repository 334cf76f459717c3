import { randomBytes } from 'node:crypto';
import { TesseraError, type ValueObject } from '@tessera/core';
import type { RouterCursor } from './router-cursor.js';

/** MongoDB's cursorTimeoutMillis default: a cursor idle this long is killed. */
export const CURSOR_IDLE_TIMEOUT_MS = 10 * 60 * 1000;

interface Entry {
  readonly cursor: RouterCursor;
  /** The logical session the cursor was opened in; killed with it. */
  readonly sessionId: string | undefined;
  /** The user who opened it, when the router checks callers: only that user may use or kill it. */
  readonly owner: string | undefined;
  lastUsed: number;
  /** The getMore in progress; the next waits for it, so batches never interleave. */
  busy: Promise<unknown>;
}

/**
 * The router's open cursors by id. Ids are decimal strings of random positive 63-bit integers
 * ("0" means exhausted, as MongoDB's cursor id 0). A cursor not used for the idle timeout is
 * closed by `reapIdle` (its owner calls it periodically), which kills its shard cursors.
 */
export class CursorRegistry {
  private readonly cursors = new Map<string, Entry>();

  constructor(
    private readonly now: () => number = Date.now,
    private readonly idleTimeoutMs = CURSOR_IDLE_TIMEOUT_MS,
  ) {}

  /** Registers an open cursor (of a logical session and a user, when given) and returns its id. */
  register(cursor: RouterCursor, sessionId?: string, owner?: string): string {
    let id: string;
    do {
      id = (randomBytes(8).readBigUInt64BE() >> 1n).toString();
    } while (id === '0' || this.cursors.has(id));
    this.cursors.set(id, { cursor, sessionId, owner, lastUsed: this.now(), busy: Promise.resolve() });
    return id;
  }

  /**
   * The next batch of a cursor for `caller`; the cursor is forgotten once exhausted.
   * Throws `CURSOR_NOT_FOUND` for an unknown, exhausted, killed or timed-out id, or another user's.
   */
  async next(
    id: string,
    batchSize: number,
    caller?: string,
  ): Promise<{ cursor: RouterCursor; documents: ValueObject[]; exhausted: boolean }> {
    const entry = this.entry(id, caller);
    const run = entry.busy.then(async () => {
      if (this.cursors.get(id) !== entry) throw cursorNotFound(id);
      entry.lastUsed = this.now();
      try {
        const documents = await entry.cursor.nextBatch(batchSize);
        if (entry.cursor.isExhausted) this.cursors.delete(id);
        return { cursor: entry.cursor, documents, exhausted: entry.cursor.isExhausted };
      } catch (error) {
        // A cursor whose shard failed cannot resume where it was: drop it.
        this.cursors.delete(id);
        await entry.cursor.close();
        throw error;
      } finally {
        entry.lastUsed = this.now();
      }
    });
    entry.busy = run.catch(() => undefined);
    return run;
  }

  /** Kills a cursor for `caller`. Throws `CURSOR_NOT_FOUND` for an unknown id, or another user's. */
  async kill(id: string, caller?: string): Promise<void> {
    const entry = this.entry(id, caller);
    this.cursors.delete(id);
    await entry.busy;
    await entry.cursor.close();
  }

  /** Closes cursors idle for longer than the timeout; returns their ids. */
  async reapIdle(): Promise<string[]> {
    const cutoff = this.now() - this.idleTimeoutMs;
    const idle = [...this.cursors.entries()].filter(([, e]) => e.lastUsed <= cutoff);
    for (const [id] of idle) this.cursors.delete(id);
    await Promise.allSettled(idle.map(([, e]) => e.cursor.close()));
    return idle.map(([id]) => id);
  }

  /** The open cursors of a logical session. */
  countOfSession(sessionId: string): number {
    let count = 0;
    for (const entry of this.cursors.values()) if (entry.sessionId === sessionId) count++;
    return count;
  }

  /** Kills the cursors of these logical sessions (ended, expired or killed); returns their ids. */
  async killSessions(sessionIds: readonly string[]): Promise<string[]> {
    const sessions = new Set(sessionIds);
    const doomed = [...this.cursors.entries()].filter(([, e]) => e.sessionId !== undefined && sessions.has(e.sessionId));
    for (const [id] of doomed) this.cursors.delete(id);
    await Promise.allSettled(doomed.map(async ([, e]) => e.busy.then(() => e.cursor.close())));
    return doomed.map(([id]) => id);
  }

  /** Closes every cursor (shutdown). */
  async closeAll(): Promise<void> {
    const all = [...this.cursors.values()];
    this.cursors.clear();
    await Promise.allSettled(all.map((e) => e.cursor.close()));
  }

  get size(): number {
    return this.cursors.size;
  }

  /**
   * Another user's cursor is answered as an unknown one (MongoDB answers Unauthorized): the
   * refusal says nothing of whether the id is open.
   */
  private entry(id: string, caller: string | undefined): Entry {
    const entry = this.cursors.get(id);
    if (entry === undefined || entry.owner !== caller) throw cursorNotFound(id);
    return entry;
  }
}

function cursorNotFound(id: string): TesseraError {
  return new TesseraError('CURSOR_NOT_FOUND', `cursor id ${id} not found: it was exhausted, killed, or idle for more than 10 minutes`, {
    details: { cursorId: id },
  });
}
