import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compareClusterTimestamps } from '@tessera/core';
import { VectorClockService } from '@tessera/platform';
import { inMemoryShardClock, testWriteTimes } from '../../../../test/fakes/write-times.js';
import { clusterTimeFromSql, clusterTimeToSql } from './write-time.js';

const settled = async (promise: Promise<unknown>) => {
  let done = false;
  void promise.then(() => (done = true));
  for (let i = 0; i < 5; i++) await Promise.resolve();
  await new Promise((resolve) => setImmediate(resolve));
  return done;
};

describe('write times', () => {
  it('keep reads at a time waiting until every write at or before it has ended, and only those', async () => {
    const times = testWriteTimes();
    let endFirst!: () => void;
    let endSecond!: () => void;
    const first = times.run((w) => new Promise<typeof w>((resolve) => (endFirst = () => resolve(w))));
    await new Promise((resolve) => setImmediate(resolve));
    const second = times.run((w) => new Promise<typeof w>((resolve) => (endSecond = () => resolve(w))));
    await new Promise((resolve) => setImmediate(resolve));
    endSecond();
    const secondTime = (await second).time;
    // The first write is still in flight and older: a read at the second's time must wait for it.
    const read = times.appliedThrough(secondTime);
    expect(await settled(read)).toBe(false);
    endFirst();
    const firstTime = (await first).time;
    expect(compareClusterTimestamps(firstTime, secondTime)).toBe(-1);
    expect(await settled(read)).toBe(true);
  });

  it('do not hold a read back for writes that started after its time', async () => {
    const times = testWriteTimes();
    const before = (await times.run(async (w) => w)).time;
    let end!: () => void;
    const later = times.run(() => new Promise<void>((resolve) => (end = resolve)));
    await new Promise((resolve) => setImmediate(resolve));
    expect(await settled(times.appliedThrough(before))).toBe(true);
    end();
    await later;
  });

  it('tick past any time gossiped to the shard', async () => {
    const clock = new VectorClockService();
    const times = testWriteTimes(clock);
    const gossiped = { t: Math.floor(Date.now() / 1000) + 20, i: 9 };
    clock.advance({ clusterTime: gossiped });
    const written = (await times.run(async (w) => w)).time;
    expect(compareClusterTimestamps(written, gossiped)).toBe(1);
  });

  it('stay below the persisted ceiling, and start a restarted clock at it', async () => {
    const restartedClock = inMemoryShardClock(4_000_000_000);
    const restarted = testWriteTimes(new VectorClockService(), restartedClock.store);
    await restarted.onModuleInit();
    const first = (await restarted.run(async (w) => w)).time;
    expect(first.t).toBe(4_000_000_000);
    // The tick reached the ceiling's second: the ceiling moved past it before the time was used.
    expect(restartedClock.raised).toEqual([4_000_000_000 + 30]);
    // A fresh shard's clock is at zero and its ceiling too: the first tick takes the wall clock's
    // second, so the ceiling must move past that, not past zero.
    const freshClock = inMemoryShardClock(0);
    const fresh = testWriteTimes(new VectorClockService(), freshClock.store);
    await fresh.onModuleInit();
    const written = (await fresh.run(async (w) => w)).time;
    expect(freshClock.raised.at(-1)!).toBeGreaterThan(written.t);
  });

  it('store as an int8 that sorts as the timestamps do, and back', () => {
    const timestamp = fc.record({ t: fc.integer({ min: 0, max: 0xffffffff }), i: fc.integer({ min: 0, max: 0xffffffff }) });
    fc.assert(
      fc.property(timestamp, timestamp, (a, b) => {
        const [x, y] = [BigInt(clusterTimeToSql(a)), BigInt(clusterTimeToSql(b))];
        expect(x >= -(2n ** 63n) && x < 2n ** 63n).toBe(true);
        expect(Math.sign(Number(x - y))).toBe(compareClusterTimestamps(a, b));
        expect(clusterTimeFromSql(clusterTimeToSql(a))).toEqual(a);
      }),
    );
  });
});
