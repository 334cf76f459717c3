import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type { Logger } from 'pino';
import {
  type ClusterTimestamp,
  TesseraError,
  checkReadConcernTime,
  clusterTimestampToString,
  compareClusterTimestamps,
} from '@tessera/core';
import type { ShardReadConcern } from '@tessera/protocol';
import { LOGGER, type Periodic, SETTINGS, VectorClockService, runPeriodically } from '@tessera/platform';
import type { ShardSettings } from '../shard.settings.js';
import { ShardClockStore } from './shard-clock.store.js';
import { WriteTimes } from './write-times.service.js';

const TRIM_INTERVAL_MS = 10_000;
const TRIM_BATCH = 10_000;
/**
 * Versions are trimmed this long after they leave the window, so that a read admitted at the
 * window's edge still finds them while it runs.
 */
const TRIM_GRACE_SECS = 60;

/**
 * The read side of ClusterTime on a shard: admits reads with `afterClusterTime` (causal
 * consistency) and `atClusterTime` (snapshot reads) once every write up to that time has ended,
 * refuses a snapshot older than minSnapshotHistoryWindowInSeconds (or than the start of history)
 * with `SNAPSHOT_TOO_OLD`, and trims versions that left the window.
 */
@Injectable()
export class SnapshotHistory implements OnApplicationBootstrap, OnApplicationShutdown {
  private historySince: ClusterTimestamp | null = null;
  private trimmer: Periodic | undefined;

  constructor(
    private readonly store: ShardClockStore,
    private readonly writeTimes: WriteTimes,
    private readonly clock: VectorClockService,
    @Inject(SETTINGS) private readonly settings: ShardSettings,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    const keep = this.windowSecs > 0;
    // Every write from now on gets a later time (the clock starts at the persisted ceiling).
    this.historySince = await this.store.keepHistorySince(keep ? this.clock.now().clusterTime : null);
    if (keep)
      this.trimmer = runPeriodically(
        () => this.trim(),
        TRIM_INTERVAL_MS,
        (error) => this.logger.warn({ err: error }, 'history trim failed'),
      );
  }

  onApplicationShutdown(): void {
    this.trimmer?.stop();
  }

  /**
   * Waits until the read may run: every write at or before its `afterClusterTime` or
   * `atClusterTime` has ended here. Answers the snapshot time of a snapshot read. Throws
   * `INVALID_OPTIONS` for a time past this shard's ClusterTime (no node has handed it out: the
   * router gossips its own time with each request) and `SNAPSHOT_TOO_OLD`.
   */
  async admit(readConcern: ShardReadConcern | undefined): Promise<ClusterTimestamp | undefined> {
    const { afterClusterTime, atClusterTime } = readConcern ?? {};
    const time = atClusterTime ?? afterClusterTime;
    if (time === undefined) return undefined;
    checkReadConcernTime(atClusterTime === undefined ? 'afterClusterTime' : 'atClusterTime', time, this.clock.now().clusterTime);
    if (atClusterTime !== undefined) this.checkWithinWindow(atClusterTime);
    await this.writeTimes.appliedThrough(time);
    return atClusterTime;
  }

  private checkWithinWindow(atClusterTime: ClusterTimestamp): void {
    const oldest = Math.floor(Date.now() / 1000) - this.windowSecs;
    const since = this.historySince;
    if (since !== null && atClusterTime.t >= oldest && compareClusterTimestamps(atClusterTime, since) >= 0) return;
    throw new TesseraError(
      'SNAPSHOT_TOO_OLD',
      since === null
        ? 'Read timestamp is older than the oldest available timestamp: this shard keeps no history (minSnapshotHistoryWindowInSeconds is 0)'
        : `Read timestamp ${clusterTimestampToString(atClusterTime)} is older than the oldest available timestamp: history is kept for minSnapshotHistoryWindowInSeconds (${this.windowSecs} s)${compareClusterTimestamps(atClusterTime, since) < 0 ? `, and from ${clusterTimestampToString(since)} on` : ''}`,
      {
        details: { atClusterTime, minSnapshotHistoryWindowInSeconds: this.windowSecs, ...(since !== null ? { historySince: since } : {}) },
      },
    );
  }

  private async trim(): Promise<void> {
    const before = { t: Math.floor(Date.now() / 1000) - this.windowSecs - TRIM_GRACE_SECS, i: 0 };
    let trimmed = 0;
    for (;;) {
      const n = await this.store.trimHistory(before, TRIM_BATCH);
      trimmed += n;
      if (n < TRIM_BATCH) break;
    }
    if (trimmed > 0) this.logger.debug({ trimmed }, `trimmed ${trimmed} document version(s) older than the snapshot window`);
  }

  private get windowSecs(): number {
    return this.settings.TESSERA_MIN_SNAPSHOT_HISTORY_WINDOW_SECS;
  }
}
