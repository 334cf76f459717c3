import type { EntityManager } from 'typeorm';
import type { ClusterTimestamp } from '@tessera/core';

/**
 * The ClusterTime a write stamps its rows with (`valid_from`, and `valid_to` of the versions it
 * replaces), with its SQL form and whether replaced versions are kept.
 */
export interface WriteTime {
  readonly time: ClusterTimestamp;
  /** `time` as the int8 the tables store (`clusterTimeToSql`). */
  readonly sql: string;
  /** False while history is off: the trigger then keeps no replaced version. */
  readonly keepHistory: boolean;
}

/**
 * The default of each collection table's `valid_from`: the time the row's transaction declared
 * (`declareWriteTime`), for rows stored without one (COPY of a migration's cloned batch). A
 * transaction that declared none fails rather than store a row with no time.
 */
export const VALID_FROM_DEFAULT = "current_setting('tessera.write_time')::int8";

const TWO_32 = 2n ** 32n;
const TWO_63 = 2n ** 63n;

/**
 * A ClusterTime as a signed int8 that sorts as the timestamp does: MongoDB's unsigned 64-bit
 * `t << 32 | i`, shifted down by 2^63 so that every (t, i) fits Postgres' signed int8.
 */
export function clusterTimeToSql(time: ClusterTimestamp): string {
  return (BigInt(time.t) * TWO_32 + BigInt(time.i) - TWO_63).toString();
}

/** The inverse of `clusterTimeToSql`. */
export function clusterTimeFromSql(value: string): ClusterTimestamp {
  const unsigned = BigInt(value) + TWO_63;
  return { t: Number(unsigned / TWO_32), i: Number(unsigned % TWO_32) };
}

/**
 * Names the write's time in its transaction, for the history trigger on the collection tables
 * (migrations/shard/1764300000000-document-history.ts): every transaction that updates or deletes
 * documents calls this first. A transaction that forgets fails on its first such row, rather than
 * keep a version with no end.
 */
export async function declareWriteTime(manager: EntityManager, writeTime: WriteTime): Promise<void> {
  await manager.query("SELECT set_config('tessera.write_time', $1, true), set_config('tessera.keep_history', $2, true)", [
    writeTime.sql,
    writeTime.keepHistory ? 'on' : 'off',
  ]);
}
