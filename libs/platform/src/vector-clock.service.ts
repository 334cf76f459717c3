import { Injectable } from '@nestjs/common';
import { type ClusterTimestamp, type VectorTime, ZERO_CLUSTER_TIMESTAMP, advanceVectorTime, tickClusterTime } from '@tessera/core';
import type { ClockGossip } from '@tessera/protocol';

/**
 * This node's view of the vector clock. Routers only advance it from gossip; shards also tick
 * ClusterTime for each write; the config server also advances it after each catalog write it
 * ticked. It never moves backwards.
 */
@Injectable()
export class VectorClockService implements ClockGossip {
  private time: VectorTime = {
    clusterTime: ZERO_CLUSTER_TIMESTAMP,
    configTime: ZERO_CLUSTER_TIMESTAMP,
    topologyTime: ZERO_CLUSTER_TIMESTAMP,
  };

  now(): VectorTime {
    return this.time;
  }

  advance(received: Partial<VectorTime>): void {
    this.time = advanceVectorTime(this.time, received);
  }

  /** Ticks ClusterTime for a write this node made (shards only), past anything gossiped to it; answers the write's time. */
  tickClusterTime(nowSeconds: number = Date.now() / 1000): ClusterTimestamp {
    const clusterTime = tickClusterTime(this.time.clusterTime, nowSeconds);
    this.time = { ...this.time, clusterTime };
    return clusterTime;
  }
}
