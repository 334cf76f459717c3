import { TesseraError } from '../errors.js';
import { type ClusterTimestamp, clusterTimestampToString, compareClusterTimestamps, makeClusterTimestamp } from './cluster-timestamp.js';

/**
 * The vector clock's components that Tessera gossips between nodes (sharding-internals.md, "The
 * vector clock"): ClusterTime ticks on every write to user data on a shard, ConfigTime on every
 * catalog write, TopologyTime when a shard is added or removed, and
 * ClusterTime >= ConfigTime >= TopologyTime always holds.
 */
export interface VectorTime {
  readonly clusterTime: ClusterTimestamp;
  readonly configTime: ClusterTimestamp;
  readonly topologyTime: ClusterTimestamp;
}

/**
 * The next ConfigTime after `last` at wall-clock second `nowSeconds`: the counter restarts at 1
 * when the second moved forward, otherwise it increments, so ticks are strictly increasing even
 * if the wall clock stands still or steps back. Throws `BAD_VALUE` if the counter would overflow.
 */
export function tickClusterTime(last: ClusterTimestamp, nowSeconds: number): ClusterTimestamp {
  const seconds = Math.floor(nowSeconds);
  return seconds > last.t ? makeClusterTimestamp(seconds, 1) : makeClusterTimestamp(last.t, last.i + 1);
}

/**
 * Refuses a ClusterTime more than `maxDriftSecs` ahead of the wall clock second `nowSeconds`
 * (MongoDB's maxAcceptableLogicalClockDriftSecs): a node that advanced to it would give every
 * later write a time that far in the future, and a signed time that far ahead means a clock
 * gone wrong, not a node that wrote. Throws `CLUSTER_TIME_FAILS_RATE_LIMITER`.
 */
export function checkClusterTimeDrift(received: ClusterTimestamp, nowSeconds: number, maxDriftSecs: number): void {
  const ahead = received.t - Math.floor(nowSeconds);
  if (ahead > maxDriftSecs) {
    throw new TesseraError(
      'CLUSTER_TIME_FAILS_RATE_LIMITER',
      `New cluster time, ${received.t}, is too far from this node's wall clock time, ${Math.floor(nowSeconds)}: it is ${ahead} s ahead, more than maxAcceptableLogicalClockDriftSecs (${maxDriftSecs} s)`,
      { details: { clusterTime: received, wallClockSeconds: Math.floor(nowSeconds), maxAcceptableLogicalClockDriftSecs: maxDriftSecs } },
    );
  }
}

/**
 * Refuses a read's `afterClusterTime` or `atClusterTime` past `current`, this node's ClusterTime:
 * no node has handed that time out, so no write at it can be waited for (MongoDB's message).
 * Throws `INVALID_OPTIONS`.
 */
export function checkReadConcernTime(
  field: 'afterClusterTime' | 'atClusterTime',
  requested: ClusterTimestamp,
  current: ClusterTimestamp,
): void {
  if (compareClusterTimestamps(requested, current) <= 0) return;
  throw new TesseraError(
    'INVALID_OPTIONS',
    `readConcern ${field} value must not be greater than the current clusterTime. Requested clusterTime: ${clusterTimestampToString(requested)}; current clusterTime: ${clusterTimestampToString(current)}`,
    { details: { field: `readConcern.${field}`, requested, clusterTime: current } },
  );
}

/** The later of two cluster timestamps (`a` when equal). Throws nothing. */
export function laterClusterTime(a: ClusterTimestamp, b: ClusterTimestamp): ClusterTimestamp {
  return compareClusterTimestamps(a, b) >= 0 ? a : b;
}

/**
 * `current` advanced by what another node reported: each component only moves forward, and
 * ClusterTime moves to ConfigTime when that passed it, so the components' order holds. Throws nothing.
 */
export function advanceVectorTime(current: VectorTime, received: Partial<VectorTime>): VectorTime {
  const later = (mine: ClusterTimestamp, theirs: ClusterTimestamp | undefined) =>
    theirs === undefined ? mine : laterClusterTime(mine, theirs);
  const configTime = later(current.configTime, received.configTime);
  return {
    clusterTime: laterClusterTime(later(current.clusterTime, received.clusterTime), configTime),
    configTime,
    topologyTime: later(current.topologyTime, received.topologyTime),
  };
}

/** Parses the wire form `"t,i"`; returns undefined for anything else. Throws nothing. */
export function parseClusterTimestamp(text: string | undefined): ClusterTimestamp | undefined {
  const match = text === undefined ? null : /^(\d{1,10}),(\d{1,10})$/.exec(text);
  if (match === null) return undefined;
  const t = Number(match[1]);
  const i = Number(match[2]);
  return t <= 0xffffffff && i <= 0xffffffff ? { t, i } : undefined;
}
