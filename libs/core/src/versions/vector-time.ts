import { type ClusterTimestamp, compareClusterTimestamps, makeClusterTimestamp } from './cluster-timestamp.js';

/**
 * The vector clock's components that Tessera gossips between nodes (sharding-internals.md, "The
 * vector clock"): ConfigTime ticks on every catalog write, TopologyTime when a shard is added
 * or removed, and TopologyTime <= ConfigTime always holds.
 */
export interface VectorTime {
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

/** The later of two cluster timestamps (`a` when equal). Throws nothing. */
export function laterClusterTime(a: ClusterTimestamp, b: ClusterTimestamp): ClusterTimestamp {
  return compareClusterTimestamps(a, b) >= 0 ? a : b;
}

/** `current` advanced by what another node reported: each component only moves forward. Throws nothing. */
export function advanceVectorTime(current: VectorTime, received: Partial<VectorTime>): VectorTime {
  return {
    configTime: received.configTime === undefined ? current.configTime : laterClusterTime(current.configTime, received.configTime),
    topologyTime:
      received.topologyTime === undefined ? current.topologyTime : laterClusterTime(current.topologyTime, received.topologyTime),
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
