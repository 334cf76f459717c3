/**
 * Slows down guessing: each failed sign-in is counted against the caller's address and against
 * the user (or key) it tried, and once either has failed more than FREE_FAILED_SIGN_INS times
 * within FAILED_SIGN_IN_WINDOW_MS, every further attempt on it waits twice as long as the last,
 * up to MAX_SIGN_IN_DELAY_MS, before it is answered. A success clears the user's count (not the
 * address's: one right guess among many must not reset a spray). Bounded: past MAX_TRACKED
 * subjects the oldest are forgotten, so a flood of names cannot grow the table.
 */

/** Failures a subject may have in the window before its attempts are slowed. */
export const FREE_FAILED_SIGN_INS = 3;
/** How long a failure counts. */
export const FAILED_SIGN_IN_WINDOW_MS = 15 * 60_000;
/** The first delay, doubled with each failure past the free ones. */
export const FIRST_SIGN_IN_DELAY_MS = 250;
/** The longest delay. */
export const MAX_SIGN_IN_DELAY_MS = 4_000;
const MAX_TRACKED = 100_000;

interface Failures {
  count: number;
  lastMs: number;
}

/** Failed sign-in counts by subject (`user:<name>`, `address:<ip>`). */
export class FailedSignIns {
  private readonly failures = new Map<string, Failures>();

  /** How long an attempt on these subjects waits before it is answered, at `nowMs`. */
  delayMs(subjects: readonly string[], nowMs: number): number {
    let worst = 0;
    for (const subject of subjects) worst = Math.max(worst, this.current(subject, nowMs));
    if (worst <= FREE_FAILED_SIGN_INS) return 0;
    return Math.min(MAX_SIGN_IN_DELAY_MS, FIRST_SIGN_IN_DELAY_MS * 2 ** (worst - FREE_FAILED_SIGN_INS - 1));
  }

  /** Counts a failure against each subject; answers the highest count among them. */
  failed(subjects: readonly string[], nowMs: number): number {
    let highest = 0;
    for (const subject of subjects) {
      const count = this.current(subject, nowMs) + 1;
      this.failures.delete(subject);
      this.failures.set(subject, { count, lastMs: nowMs });
      highest = Math.max(highest, count);
    }
    while (this.failures.size > MAX_TRACKED) this.failures.delete(this.failures.keys().next().value!);
    return highest;
  }

  /** Forgets a subject's failures (the user's, after it signed in). */
  succeeded(subject: string): void {
    this.failures.delete(subject);
  }

  private current(subject: string, nowMs: number): number {
    const entry = this.failures.get(subject);
    if (entry === undefined) return 0;
    if (nowMs - entry.lastMs > FAILED_SIGN_IN_WINDOW_MS) {
      this.failures.delete(subject);
      return 0;
    }
    return entry.count;
  }
}
