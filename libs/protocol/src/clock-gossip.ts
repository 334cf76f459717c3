import { type VectorTime, parseClusterTimestamp } from '@tessera/core';

/** Headers that carry the vector clock on every internal request and response. */
export const CLUSTER_TIME_HEADER = 'x-tessera-cluster-time';
export const CONFIG_TIME_HEADER = 'x-tessera-config-time';
export const TOPOLOGY_TIME_HEADER = 'x-tessera-topology-time';

/** What a node gossips: it sends its vector time and advances from what it receives. */
export interface ClockGossip {
  now(): VectorTime;
  advance(received: Partial<VectorTime>): void;
}

/** The headers that carry `time`. */
export function vectorTimeHeaders(time: VectorTime): Record<string, string> {
  return {
    [CLUSTER_TIME_HEADER]: `${time.clusterTime.t},${time.clusterTime.i}`,
    [CONFIG_TIME_HEADER]: `${time.configTime.t},${time.configTime.i}`,
    [TOPOLOGY_TIME_HEADER]: `${time.topologyTime.t},${time.topologyTime.i}`,
  };
}

/** The vector time components present and well-formed in `headers`. */
export function vectorTimeFromHeaders(headers: Record<string, string | string[] | undefined>): Partial<VectorTime> {
  const read = (name: string) => {
    const value = headers[name];
    return parseClusterTimestamp(Array.isArray(value) ? value[0] : value);
  };
  const clusterTime = read(CLUSTER_TIME_HEADER);
  const configTime = read(CONFIG_TIME_HEADER);
  const topologyTime = read(TOPOLOGY_TIME_HEADER);
  return {
    ...(clusterTime ? { clusterTime } : {}),
    ...(configTime ? { configTime } : {}),
    ...(topologyTime ? { topologyTime } : {}),
  };
}
