import { describe, expect, it } from 'vitest';
import { VectorClockService } from './vector-clock.service.js';

describe('VectorClockService', () => {
  it('ticks ClusterTime past the wall clock and past anything gossiped, never backwards', () => {
    const clock = new VectorClockService();
    expect(clock.tickClusterTime(1_000.2)).toEqual({ t: 1_000, i: 1 });
    expect(clock.tickClusterTime(1_000.9)).toEqual({ t: 1_000, i: 2 });
    // A node's gossip ahead of this wall clock: the next tick passes it.
    clock.advance({ clusterTime: { t: 1_005, i: 7 } });
    expect(clock.tickClusterTime(1_001)).toEqual({ t: 1_005, i: 8 });
    // Older gossip changes nothing.
    clock.advance({ clusterTime: { t: 900, i: 1 } });
    expect(clock.now().clusterTime).toEqual({ t: 1_005, i: 8 });
  });

  it('keeps ClusterTime at or above a gossiped ConfigTime', () => {
    const clock = new VectorClockService();
    clock.tickClusterTime(1_000);
    clock.advance({ configTime: { t: 2_000, i: 3 } });
    expect(clock.now().clusterTime).toEqual({ t: 2_000, i: 3 });
  });
});
