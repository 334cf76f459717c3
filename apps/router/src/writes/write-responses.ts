import type { PublicWriteError } from '../api/extended-json.js';

export interface InsertResponse {
  insertedCount: number;
  /**
   * `_id` by the user's statement index, as the drivers' insertMany result. Ascending: the keys
   * are array indexes, which JavaScript enumerates (and JSON prints) in numeric order.
   */
  insertedIds: Record<string, unknown>;
  writeErrors: PublicWriteError[];
  /** The statements answered from the session's history (MongoDB's `retriedStmtIds`), when any. */
  retriedStmtIds?: number[];
  ok: 1;
}

export interface UpdateResponse {
  matchedCount: number;
  modifiedCount: number;
  upsertedCount: number;
  /** By statement index, ascending as `insertedIds`. */
  upsertedIds: Record<string, unknown>;
  writeErrors: PublicWriteError[];
  retriedStmtIds?: number[];
  ok: 1;
}

export interface DeleteResponse {
  deletedCount: number;
  writeErrors: PublicWriteError[];
  retriedStmtIds?: number[];
  ok: 1;
}

export function noneUpdated(): UpdateResponse {
  return { matchedCount: 0, modifiedCount: 0, upsertedCount: 0, upsertedIds: {}, writeErrors: [], ok: 1 };
}

export function noneDeleted(): DeleteResponse {
  return { deletedCount: 0, writeErrors: [], ok: 1 };
}

/**
 * Runs statements `0..count-1` one command each, in order, and merges their answers into one
 * whose indexes are the user's: an ordered batch stops at its first error, as MongoDB's does.
 * `run(i)` answers for a command of statement `i` alone (its indexes 0).
 */
export async function eachStatement<R extends UpdateResponse | DeleteResponse>(
  count: number,
  ordered: boolean,
  run: (index: number) => Promise<R>,
  empty: () => R,
): Promise<R> {
  const total = empty();
  for (let index = 0; index < count; index++) {
    const one = await run(index);
    mergeInto(total, one, index);
    if (ordered && one.writeErrors.length > 0) break;
  }
  return total;
}

function mergeInto(total: UpdateResponse | DeleteResponse, one: UpdateResponse | DeleteResponse, index: number): void {
  if ('deletedCount' in total) total.deletedCount += (one as DeleteResponse).deletedCount;
  else {
    const update = one as UpdateResponse;
    total.matchedCount += update.matchedCount;
    total.modifiedCount += update.modifiedCount;
    total.upsertedCount += update.upsertedCount;
    for (const [at, _id] of Object.entries(update.upsertedIds)) total.upsertedIds[String(index + Number(at))] = _id;
  }
  total.writeErrors.push(...one.writeErrors.map((error) => ({ ...error, index: index + error.index })));
  if (one.retriedStmtIds !== undefined) total.retriedStmtIds = [...(total.retriedStmtIds ?? []), ...one.retriedStmtIds];
}
