import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type ClusterTimestamp, compareClusterTimestamps } from './cluster-timestamp.js';
import {
  type VectorTime,
  advanceVectorTime,
  checkClusterTimeDrift,
  checkReadConcernTime,
  parseClusterTimestamp,
  tickClusterTime,
} from './vector-time.js';

describe('the vector clock', () => {
  it('restarts the counter at 1 when the wall clock second moved forward', () => {
    expect(tickClusterTime({ t: 100, i: 7 }, 101.9)).toEqual({ t: 101, i: 1 });
  });

  it('increments the counter when the second is the same or the wall clock stepped back', () => {
    expect(tickClusterTime({ t: 100, i: 7 }, 100)).toEqual({ t: 100, i: 8 });
    expect(tickClusterTime({ t: 100, i: 7 }, 50)).toEqual({ t: 100, i: 8 });
  });

  it('never moves a component backwards when advancing from gossip', () => {
    const current = { clusterTime: { t: 11, i: 1 }, configTime: { t: 10, i: 5 }, topologyTime: { t: 9, i: 1 } };
    expect(advanceVectorTime(current, { configTime: { t: 10, i: 4 }, topologyTime: { t: 9, i: 2 } })).toEqual({
      clusterTime: { t: 11, i: 1 },
      configTime: { t: 10, i: 5 },
      topologyTime: { t: 9, i: 2 },
    });
    expect(advanceVectorTime(current, {})).toEqual(current);
  });

  it('parses only the "t,i" wire form', () => {
    expect(parseClusterTimestamp('1700000000,3')).toEqual({ t: 1700000000, i: 3 });
    expect(parseClusterTimestamp(undefined)).toBeUndefined();
    expect(parseClusterTimestamp('1,2,3')).toBeUndefined();
    expect(parseClusterTimestamp('99999999999,1')).toBeUndefined();
  });

  it('moves ClusterTime up to a ConfigTime that passed it', () => {
    const current = { clusterTime: { t: 10, i: 1 }, configTime: { t: 10, i: 1 }, topologyTime: { t: 9, i: 1 } };
    expect(advanceVectorTime(current, { configTime: { t: 12, i: 3 } }).clusterTime).toEqual({ t: 12, i: 3 });
  });

  it("refuses a read's time past the node's ClusterTime, naming the field, and takes one at or before it", () => {
    expect(() => checkReadConcernTime('afterClusterTime', { t: 10, i: 2 }, { t: 10, i: 2 })).not.toThrow();
    expect(() => checkReadConcernTime('atClusterTime', { t: 10, i: 3 }, { t: 10, i: 2 })).toThrow(
      expect.objectContaining({ code: 'INVALID_OPTIONS', details: expect.objectContaining({ field: 'readConcern.atClusterTime' }) }),
    );
  });

  it('refuses a ClusterTime more than the allowed drift ahead of the wall clock, and takes one within it', () => {
    expect(() => checkClusterTimeDrift({ t: 1060, i: 9 }, 1000.5, 60)).not.toThrow();
    expect(() => checkClusterTimeDrift({ t: 1061, i: 0 }, 1000.5, 60)).toThrow(
      expect.objectContaining({
        code: 'CLUSTER_TIME_FAILS_RATE_LIMITER',
        details: expect.objectContaining({ clusterTime: { t: 1061, i: 0 } }),
      }),
    );
  });
});

describe('the clock, as a property', () => {
  const time = fc.record({ t: fc.integer({ min: 1, max: 2_000_000_000 }), i: fc.integer({ min: 0, max: 1_000_000 }) });
  const vector = fc
    .tuple(time, time, time)
    .map(([a, b, c]) => [a, b, c].sort(compareClusterTimestamps))
    .map(([topologyTime, configTime, clusterTime]) => ({ clusterTime, configTime, topologyTime }) as VectorTime);
  const received = fc.record({ clusterTime: fc.option(time, { nil: undefined }), configTime: fc.option(time, { nil: undefined }) });
  const atLeast = (a: ClusterTimestamp, b: ClusterTimestamp) => compareClusterTimestamps(a, b) >= 0;

  it('never goes backwards, keeps its components in order, and ticks past anything gossiped', () => {
    fc.assert(
      fc.property(vector, fc.array(received, { maxLength: 8 }), fc.integer({ min: 0, max: 2_000_000_000 }), (start, gossip, now) => {
        let clock = start;
        for (const message of gossip) {
          const next = advanceVectorTime(clock, message);
          expect(atLeast(next.clusterTime, clock.clusterTime) && atLeast(next.configTime, clock.configTime)).toBe(true);
          expect(atLeast(next.clusterTime, next.configTime) && atLeast(next.configTime, next.topologyTime)).toBe(true);
          for (const seen of [message.clusterTime, message.configTime]) if (seen) expect(atLeast(next.clusterTime, seen)).toBe(true);
          const ticked = tickClusterTime(next.clusterTime, now);
          expect(compareClusterTimestamps(ticked, next.clusterTime)).toBe(1);
          clock = { ...next, clusterTime: ticked };
        }
      }),
    );
  });
});
