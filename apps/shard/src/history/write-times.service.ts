import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import { type ClusterTimestamp, compareClusterTimestamps, tickClusterTime } from '@tessera/core';
import { SETTINGS, VectorClockService } from '@tessera/platform';
import type { ShardSettings } from '../shard.settings.js';
import { ShardClockStore } from './shard-clock.store.js';
import { type WriteTime, clusterTimeToSql } from './write-time.js';

/** How far ahead of the clock the persisted ceiling is moved, in seconds. */
const CEILING_STEP_SECS = 30;

/**
 * Gives each write its ClusterTime before it runs and knows which writes are still in flight
 * (MongoDB's all-durable timestamp): a read at time T waits until every write with a time at or
 * before T has ended, so it sees all of them and none can commit behind it later. Times are
 * ticked from the vector clock, so they increase in the order writes start, and a read that
 * gossiped T first makes every later write's time greater than T.
 *
 * A write's time stays below a ceiling persisted in `shard_clock`, and a restarted shard starts
 * its clock at that ceiling: no new version gets an older time than one stored before.
 */
@Injectable()
export class WriteTimes implements OnModuleInit {
  private ceilingSeconds = 0;
  private raising: Promise<void> | undefined;
  /** In-flight writes' times. */
  private readonly inFlight = new Map<number, ClusterTimestamp>();
  private nextWrite = 0;
  private waiters: Array<{ time: ClusterTimestamp; resolve: () => void }> = [];

  constructor(
    private readonly clock: VectorClockService,
    private readonly store: ShardClockStore,
    @Inject(SETTINGS) private readonly settings: ShardSettings,
  ) {}

  async onModuleInit(): Promise<void> {
    const { ceilingSeconds } = await this.store.load();
    this.ceilingSeconds = ceilingSeconds;
    this.clock.advance({ clusterTime: { t: ceilingSeconds, i: 0 } });
  }

  /** Runs a write with its time; the write is in flight until `work` settles. */
  async run<T>(work: (writeTime: WriteTime) => Promise<T>): Promise<T> {
    const reserved = await this.reserve();
    try {
      return await work(reserved.writeTime);
    } finally {
      reserved.release();
    }
  }

  /**
   * A time for a write whose end is not one call's: a transaction's prepare or commit. It is in
   * flight, holding back reads at or after it, until `release`.
   */
  async reserve(): Promise<{ writeTime: WriteTime; release: () => void }> {
    await this.belowCeiling();
    // No await between the tick and the registration: a read that looks now sees this write.
    const time = this.clock.tickClusterTime();
    return { writeTime: this.writeTimeAt(time), release: this.hold(time) };
  }

  /**
   * Keeps `time` in flight until the answered release is called: a prepared transaction found at
   * start, whose commit time must hold reads back until it is resolved.
   */
  hold(time: ClusterTimestamp): () => void {
    const id = this.nextWrite++;
    this.inFlight.set(id, time);
    return () => {
      if (this.inFlight.delete(id)) this.wakeWaiters();
    };
  }

  /** `time` as a write stamps it. */
  writeTimeAt(time: ClusterTimestamp): WriteTime {
    return { time, sql: clusterTimeToSql(time), keepHistory: this.settings.TESSERA_MIN_SNAPSHOT_HISTORY_WINDOW_SECS > 0 };
  }

  /** Resolves once no write with a time at or before `time` is in flight. */
  appliedThrough(time: ClusterTimestamp): Promise<void> {
    if (!this.writesAtOrBefore(time)) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ time, resolve }));
  }

  /** Moves the persisted ceiling ahead while the next tick could reach it. */
  private async belowCeiling(): Promise<void> {
    while (this.nextTickSeconds() + 1 >= this.ceilingSeconds) {
      this.raising ??= this.raiseCeiling().finally(() => (this.raising = undefined));
      await this.raising;
    }
  }

  private async raiseCeiling(): Promise<void> {
    const ceiling = this.nextTickSeconds() + CEILING_STEP_SECS;
    await this.store.raiseCeiling(ceiling);
    this.ceilingSeconds = Math.max(this.ceilingSeconds, ceiling);
  }

  /** The second the next tick will take (the clock's, or the wall clock's when that is ahead). */
  private nextTickSeconds(): number {
    return tickClusterTime(this.clock.now().clusterTime, Date.now() / 1000).t;
  }

  private writesAtOrBefore(time: ClusterTimestamp): boolean {
    for (const inFlight of this.inFlight.values()) if (compareClusterTimestamps(inFlight, time) <= 0) return true;
    return false;
  }

  private wakeWaiters(): void {
    if (this.waiters.length === 0) return;
    const waiting: typeof this.waiters = [];
    for (const waiter of this.waiters) {
      if (this.writesAtOrBefore(waiter.time)) waiting.push(waiter);
      else waiter.resolve();
    }
    this.waiters = waiting;
  }
}
