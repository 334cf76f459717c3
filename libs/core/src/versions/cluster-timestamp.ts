/**
 * A cluster time (MongoDB's `Timestamp`): seconds `t` and an increment `i` that orders events
 * within a second. Plain data, so it crosses the wire as JSON.
 */
import { TesseraError } from '../errors.js';

/** A point in cluster time: `t` seconds, `i` increment; both unsigned 32-bit integers. */
export interface ClusterTimestamp {
  readonly t: number;
  readonly i: number;
}

/** The zero cluster time `{t: 0, i: 0}`, below every real time. */
export const ZERO_CLUSTER_TIMESTAMP: ClusterTimestamp = Object.freeze({ t: 0, i: 0 });

/**
 * Builds a cluster time. Throws `BAD_VALUE` unless both parts are integers in 0..2^32-1.
 */
export function makeClusterTimestamp(t: number, i: number): ClusterTimestamp {
  if (!isUint32(t) || !isUint32(i)) {
    throw new TesseraError('BAD_VALUE', `A cluster time needs integer parts in 0..2^32-1, got {t: ${t}, i: ${i}}.`, { details: { t, i } });
  }
  return { t, i };
}

/** Compares two cluster times (seconds, then increment). Returns -1, 0 or 1. Throws nothing. */
export function compareClusterTimestamps(a: ClusterTimestamp, b: ClusterTimestamp): -1 | 0 | 1 {
  if (a.t !== b.t) return a.t < b.t ? -1 : 1;
  if (a.i !== b.i) return a.i < b.i ? -1 : 1;
  return 0;
}

/** True when both cluster times are the same point. Throws nothing. */
export function clusterTimestampsEqual(a: ClusterTimestamp, b: ClusterTimestamp): boolean {
  return a.t === b.t && a.i === b.i;
}

/** Returns `"t,i"`, the display form of a cluster time. Throws nothing. */
export function clusterTimestampToString(ts: ClusterTimestamp): string {
  return `${ts.t},${ts.i}`;
}

function isUint32(x: number): boolean {
  return Number.isInteger(x) && x >= 0 && x <= 0xffffffff;
}
