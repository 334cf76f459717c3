import { TesseraError } from '@tessera/core';

/**
 * MongoDB's `maxTimeMS`: an operation's time limit, passed explicitly to what it bounds (the
 * router's race, the time left a shard command carries, a shard's SQL statements). Not carried
 * by AsyncLocalStorage: on Node 20 an active one makes every promise of the process pay for
 * context propagation, several times the cost of an await in a micro-benchmark.
 */
export interface TimeLimit {
  /** `Date.now()` past which the operation has expired. */
  readonly deadline: number;
  /** As the command gave it, for the error's message. */
  readonly maxTimeMS: number;
}

/** The limit of a command's `maxTimeMS` from now; none for undefined or 0 (MongoDB's "no limit"). */
export function timeLimitOf(maxTimeMS: number | undefined): TimeLimit | undefined {
  return maxTimeMS === undefined || maxTimeMS === 0 ? undefined : { deadline: Date.now() + maxTimeMS, maxTimeMS };
}

/** The milliseconds `limit` leaves, undefined without one. Throws `MAX_TIME_MS_EXPIRED` when none are left. */
export function remainingTimeMs(limit: TimeLimit | undefined): number | undefined {
  if (limit === undefined) return undefined;
  const left = limit.deadline - Date.now();
  if (left <= 0) throw timeLimitExpired(limit.maxTimeMS);
  return left;
}

/** `{ maxTimeMS }` with the time `limit` leaves, for a command sent to a shard, or `{}` without a limit. */
export function timeLimitField(limit: TimeLimit | undefined): { maxTimeMS?: number } {
  const left = remainingTimeMs(limit);
  return left === undefined ? {} : { maxTimeMS: Math.max(1, Math.ceil(left)) };
}

/**
 * `work`, or `MAX_TIME_MS_EXPIRED` once `limit` passes, whichever comes first. The work itself
 * is stopped by what it was given the limit for (its shard commands, its statements).
 */
export async function raceTimeLimit<T>(limit: TimeLimit | undefined, work: () => Promise<T>): Promise<T> {
  if (limit === undefined) return work();
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(timeLimitExpired(limit.maxTimeMS)), Math.max(0, limit.deadline - Date.now()));
    timer.unref();
  });
  try {
    return await Promise.race([work(), expired]);
  } finally {
    clearTimeout(timer);
  }
}

export function timeLimitExpired(maxTimeMS: number): TesseraError {
  return new TesseraError('MAX_TIME_MS_EXPIRED', `operation exceeded time limit (maxTimeMS: ${maxTimeMS})`, { details: { maxTimeMS } });
}
