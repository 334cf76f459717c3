import { AsyncLocalStorage } from 'node:async_hooks';
import { TesseraError } from '@tessera/core';

/**
 * MongoDB's `maxTimeMS`: an operation's time limit, carried through the asynchronous work of
 * the command that set it (AsyncLocalStorage), so the statements it runs deep in a store are
 * bounded without every layer passing it on. A cursor's later batches run outside it: as in
 * MongoDB, the limit is on the command's processing, not on the time the client takes between
 * batches.
 */
const limits = new AsyncLocalStorage<{ deadline: number; maxTimeMS: number }>();

/** Runs `work` under a limit of `maxTimeMS` (none when undefined or 0, as MongoDB reads 0). */
export function withTimeLimit<T>(maxTimeMS: number | undefined, work: () => Promise<T>): Promise<T> {
  if (maxTimeMS === undefined || maxTimeMS === 0) return work();
  const limit = { deadline: Date.now() + maxTimeMS, maxTimeMS };
  return limits.run(limit, async () => {
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(timeLimitExpired(maxTimeMS)), maxTimeMS);
      timer.unref();
    });
    try {
      return await Promise.race([work(), expired]);
    } finally {
      clearTimeout(timer);
    }
  });
}

/** The milliseconds left to the current operation, or undefined when it has no limit. Throws `MAX_TIME_MS_EXPIRED` when none are. */
export function remainingTimeMs(): number | undefined {
  const limit = limits.getStore();
  if (limit === undefined) return undefined;
  const left = limit.deadline - Date.now();
  if (left <= 0) throw timeLimitExpired(limit.maxTimeMS);
  return left;
}

/** `{ maxTimeMS }` with the time left, for a command sent to a shard, or `{}` without a limit. */
export function timeLimitField(): { maxTimeMS?: number } {
  const left = remainingTimeMs();
  return left === undefined ? {} : { maxTimeMS: Math.max(1, Math.ceil(left)) };
}

export function timeLimitExpired(maxTimeMS: number): TesseraError {
  return new TesseraError('MAX_TIME_MS_EXPIRED', `operation exceeded time limit (maxTimeMS: ${maxTimeMS})`, { details: { maxTimeMS } });
}
