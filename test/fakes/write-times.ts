/**
 * Write times for tests that run shard code without a shard: `testWriteTimes()` is the real
 * `WriteTimes` over an in-memory ceiling (`inMemoryShardClock`, history kept), and `writeTimeNow()` a fresh write time
 * for tests that call the document stores directly with a handle.
 *
 *     const handle = { ns, table, pattern, owns: () => true, writeTime: writeTimeNow() };
 */
import { VectorClockService } from '@tessera/platform';
import type { ShardClockStore } from '../../apps/shard/src/history/shard-clock.store.js';
import { type WriteTime, clusterTimeToSql } from '../../apps/shard/src/history/write-time.js';
import { WriteTimes } from '../../apps/shard/src/history/write-times.service.js';
import type { ShardSettings } from '../../apps/shard/src/shard.settings.js';

/** An in-memory `shard_clock` ceiling starting at `ceilingSeconds`, with every second it was raised to. */
export function inMemoryShardClock(ceilingSeconds = 0): { store: ShardClockStore; raised: number[] } {
  let ceiling = ceilingSeconds;
  const raised: number[] = [];
  const store = {
    load: async () => ({ ceilingSeconds: ceiling, historySince: null }),
    raiseCeiling: async (seconds: number) => {
      raised.push(seconds);
      ceiling = Math.max(ceiling, seconds);
    },
  } as unknown as ShardClockStore;
  return { store, raised };
}

export function testWriteTimes(clock = new VectorClockService(), store = inMemoryShardClock().store): WriteTimes {
  return new WriteTimes(clock, store, { TESSERA_MIN_SNAPSHOT_HISTORY_WINDOW_SECS: 300 } as ShardSettings);
}

const clock = new VectorClockService();

/** The next ClusterTime of a process-wide test clock, as a write's time. */
export function writeTimeNow(): WriteTime {
  const time = clock.tickClusterTime();
  return { time, sql: clusterTimeToSql(time), keepHistory: true };
}
