import { describe, expect, it } from 'vitest';
import { advanceVectorTime, parseClusterTimestamp, tickClusterTime } from './vector-time.js';

describe('the vector clock', () => {
  it('restarts the counter at 1 when the wall clock second moved forward', () => {
    expect(tickClusterTime({ t: 100, i: 7 }, 101.9)).toEqual({ t: 101, i: 1 });
  });

  it('increments the counter when the second is the same or the wall clock stepped back', () => {
    expect(tickClusterTime({ t: 100, i: 7 }, 100)).toEqual({ t: 100, i: 8 });
    expect(tickClusterTime({ t: 100, i: 7 }, 50)).toEqual({ t: 100, i: 8 });
  });

  it('never moves a component backwards when advancing from gossip', () => {
    const current = { configTime: { t: 10, i: 5 }, topologyTime: { t: 9, i: 1 } };
    expect(advanceVectorTime(current, { configTime: { t: 10, i: 4 }, topologyTime: { t: 9, i: 2 } })).toEqual({
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
});
