import { describe, expect, it } from 'vitest';
import { type IdleInputs, insideWindow, whyIdle } from './why-idle';

const base: IdleInputs = {
  balancerMode: 'full',
  window: null,
  now: '12:00',
  balancingEnabled: true,
  compliant: false,
  violation: 'chunksImbalance',
  drainingShards: [],
  jumboChunks: 0,
  activeMigrations: 0,
  throttleMs: 0,
  roundErrors: [],
};

describe('why a collection is not moving', () => {
  it('says nothing while it moves', () => {
    expect(whyIdle({ ...base, activeMigrations: 1, balancerMode: 'off' })).toEqual([]);
  });

  it('names the balancer being off, the window and the collection switch first', () => {
    expect(whyIdle({ ...base, balancerMode: 'off' })[0]).toMatch(/balancer is off/);
    expect(whyIdle({ ...base, window: { start: '01:00', stop: '05:00' } })[0]).toMatch(/Outside the balancing window 01:00–05:00/);
    expect(whyIdle({ ...base, window: { start: '11:00', stop: '13:00' } })[0]).toMatch(/Not compliant/);
    expect(whyIdle({ ...base, balancingEnabled: false })[0]).toMatch(/off for this collection/);
  });

  it('explains a stuck collection by its jumbo chunks, draining shards and the throttle', () => {
    const reasons = whyIdle({ ...base, jumboChunks: 2, drainingShards: ['shard2'], throttleMs: 1000 });
    expect(reasons).toEqual([
      'Not compliant: the data size differs between shards by more than the threshold.',
      '2 jumbo chunk(s) cannot move unless attemptToBalanceJumboChunks is on.',
      'Draining: shard2.',
      'Throttled: the last round slept 1000 ms before migrating.',
    ]);
    expect(whyIdle({ ...base, compliant: true, violation: null })).toEqual([
      'Compliant: the shards are within the imbalance threshold, no zone is violated and no shard drains.',
    ]);
  });

  it('reads a window that wraps midnight', () => {
    expect(insideWindow('23:30', { start: '22:00', stop: '02:00' })).toBe(true);
    expect(insideWindow('01:59', { start: '22:00', stop: '02:00' })).toBe(true);
    expect(insideWindow('02:00', { start: '22:00', stop: '02:00' })).toBe(false);
  });
});
