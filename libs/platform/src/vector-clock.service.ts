import { Injectable } from '@nestjs/common';
import { type VectorTime, ZERO_CLUSTER_TIMESTAMP, advanceVectorTime } from '@tessera/core';
import type { ClockGossip } from '@tessera/protocol';

/**
 * This node's view of the vector clock. Routers and shards only advance it from gossip; the
 * config server also advances it after each catalog write it ticked. It never moves backwards.
 */
@Injectable()
export class VectorClockService implements ClockGossip {
  private time: VectorTime = { configTime: ZERO_CLUSTER_TIMESTAMP, topologyTime: ZERO_CLUSTER_TIMESTAMP };

  now(): VectorTime {
    return this.time;
  }

  advance(received: Partial<VectorTime>): void {
    this.time = advanceVectorTime(this.time, received);
  }
}
