import type { ChangelogEntry } from '../changelog/changelog.service.js';

/**
 * Sessions per changelog row. A refresh brings up to thousands of sessions, and a row per
 * session would flood the capped changelog (pushing placement history out) and the event
 * stream; one row for all of them would grow past what NOTIFY carries (the bus then reads it
 * back by id) and without bound. A hundred ids keep a row's payload within one NOTIFY and every
 * session named.
 */
export const SESSIONS_PER_ROW = 100;

/**
 * The changelog rows saying `what` about `items` (session ids, or per-session records), at most
 * `SESSIONS_PER_ROW` per row, each with `details` and the row's share under `key` and its `count`.
 */
export function sessionChangelogEntries<T>(
  what: string,
  items: readonly T[],
  details: Record<string, unknown>,
  options: { key?: string; shard?: string } = {},
): ChangelogEntry[] {
  const entries: ChangelogEntry[] = [];
  for (let start = 0; start < items.length; start += SESSIONS_PER_ROW) {
    const batch = items.slice(start, start + SESSIONS_PER_ROW);
    entries.push({
      what,
      ...(options.shard === undefined ? {} : { shard: options.shard }),
      details: { ...details, [options.key ?? 'lsids']: batch, count: batch.length },
    });
  }
  return entries;
}
