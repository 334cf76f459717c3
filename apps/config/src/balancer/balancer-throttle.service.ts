import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import { DataSource } from 'typeorm';
import {
  DEFAULT_LOAD_THROTTLE_SETTINGS,
  INITIAL_LOAD_THROTTLE_STATE,
  type LoadThrottleSettings,
  type LoadThrottleState,
  type MigrationGate,
  clonePacingOf,
  migrationGate,
  observeForegroundLoad,
} from '@tessera/core';
import type { BalancerThrottleStatus, ClonePacing } from '@tessera/protocol';
import { LOGGER, type Periodic, SETTINGS, runPeriodically } from '@tessera/platform';
import { ChangelogService } from '../changelog/changelog.service.js';
import type { ConfigSettings } from '../config.settings.js';
import { ForegroundLoadStore, type StoredLoadReport } from './foreground-load.store.js';

/** The window `currentBytesPerSecond` is measured over. */
const RATE_WINDOW_MS = 10_000;

/**
 * The continuous scheduler's throttle on the leader (libs/core load-throttle.ts): it reads the
 * routers' foreground load reports every `TESSERA_BALANCER_LOAD_POLL_MS`, tells for each window
 * whether a balancer migration ran during it (`BalancerMover` reports their starts and ends
 * here), keeps the throttle's state, and answers whether a migration may start now. Each change
 * between full speed and throttled is a `balancer.throttle` changelog row with its reason and
 * latencies.
 */
@Injectable()
export class BalancerThrottleService {
  private state: LoadThrottleState = INITIAL_LOAD_THROTTLE_STATE;
  private readonly limits: LoadThrottleSettings;
  private readonly pollMs: number;
  private inFlight = 0;
  /** Since when migrations have been in flight without a break (null: none in flight). */
  private busySince: number | null = null;
  private lastEndMs: number | null = null;
  private lastStart: { atMs: number; bytes: number } | null = null;
  /** Migrations ended within RATE_WINDOW_MS, with the bytes they cloned. */
  private recentlyMoved: Array<{ atMs: number; bytes: number }> = [];
  /** The newest report read (the database's `window_end`). */
  private readSince: string | null = null;
  private loop: Periodic | undefined;

  constructor(
    private readonly reports: ForegroundLoadStore,
    private readonly changelog: ChangelogService,
    private readonly dataSource: DataSource,
    @Inject(SETTINGS) settings: ConfigSettings,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {
    this.limits = {
      ...DEFAULT_LOAD_THROTTLE_SETTINGS,
      targetLatencyMultiple: settings.TESSERA_BALANCER_TARGET_LATENCY_MULTIPLE,
      maxBytesPerSecond: settings.TESSERA_BALANCER_MAX_BYTES_PER_SEC,
    };
    this.pollMs = settings.TESSERA_BALANCER_LOAD_POLL_MS;
  }

  /** A new term: the state is learned afresh, from the reports made from now on. */
  start(): void {
    this.stop();
    this.state = INITIAL_LOAD_THROTTLE_STATE;
    this.readSince = null;
    let first = true;
    this.loop = runPeriodically(
      async () => {
        // The first read only finds where the reports stand: older windows say nothing of now.
        const reports = await this.reports.since(this.readSince);
        if (reports.length > 0) this.readSince = reports.at(-1)!.windowEnd;
        if (first) first = false;
        else await this.observe(reports);
      },
      this.pollMs,
      (error) => this.logger.warn({ err: error }, `balancer throttle: reading the routers' load failed: ${(error as Error).message}`),
    );
  }

  stop(): void {
    this.loop?.stop();
    this.loop = undefined;
  }

  /** A balancer migration of about `bytes` starts now. */
  started(bytes: number): void {
    const now = Date.now();
    if (this.inFlight++ === 0) this.busySince = now;
    this.lastStart = { atMs: now, bytes };
  }

  /** A balancer migration ended now, having cloned `bytes` (0 when it failed). */
  ended(bytes: number): void {
    const now = Date.now();
    this.inFlight = Math.max(0, this.inFlight - 1);
    if (this.inFlight === 0) this.busySince = null;
    this.lastEndMs = now;
    this.recentlyMoved = [...this.recentlyMoved.filter((m) => now - m.atMs < RATE_WINDOW_MS), { atMs: now, bytes }];
  }

  /** Whether a migration may start now (see `migrationGate`). */
  gate(): MigrationGate {
    return migrationGate(
      this.state,
      { inFlight: this.inFlight, lastStart: this.lastStart, lastEndMs: this.lastEndMs },
      this.limits,
      Date.now(),
    );
  }

  /** How a migration started now should clone (`clonePacingOf`): undefined at full speed. */
  clonePacing(): ClonePacing | undefined {
    return clonePacingOf(this.state);
  }

  status(): BalancerThrottleStatus {
    const now = Date.now();
    const moved = this.recentlyMoved.filter((m) => now - m.atMs < RATE_WINDOW_MS).reduce((n, m) => n + m.bytes, 0);
    return {
      state: this.state.pauseMs > 0 ? 'throttled' : 'fullSpeed',
      reason: this.state.reason,
      pauseMs: this.state.pauseMs,
      idleWriteP99Ms: roundedMs(this.state.idleP99Ms),
      migratingWriteP99Ms: roundedMs(this.state.migratingP99Ms),
      targetLatencyMultiple: this.limits.targetLatencyMultiple,
      maxBytesPerSecond: this.limits.maxBytesPerSecond,
      currentBytesPerSecond: Math.round(moved / (RATE_WINDOW_MS / 1000)),
      migrationsInFlight: this.inFlight,
    };
  }

  /** One poll's reports, summed over routers: a window counts as migrating when a migration ran during it. */
  private async observe(reports: readonly StoredLoadReport[]): Promise<void> {
    const now = Date.now();
    const withWrites = reports.filter((r) => r.p99Ms !== null);
    const writes = reports.reduce((n, r) => n + r.writes, 0);
    const inFlight = reports.reduce((n, r) => n + r.inFlight, 0);
    const p99Ms = withWrites.length === 0 ? null : Math.max(...withWrites.map((r) => r.p99Ms!));
    const migrating = reports.some((r) => this.migratingDuring(now - r.ageMs - r.windowMs, now - r.ageMs));
    const before = this.state;
    this.state = observeForegroundLoad(before, { writes, p99Ms, inFlight, migrating }, this.limits);
    if (before.pauseMs > 0 !== this.state.pauseMs > 0) await this.recordChange();
  }

  private migratingDuring(startMs: number, endMs: number): boolean {
    return (this.busySince !== null && this.busySince <= endMs) || (this.lastEndMs !== null && this.lastEndMs >= startMs);
  }

  private async recordChange(): Promise<void> {
    const status = this.status();
    await this.changelog.record(this.dataSource.manager, {
      what: 'balancer.throttle',
      details: {
        state: status.state,
        reason: status.reason,
        pauseMs: status.pauseMs,
        idleWriteP99Ms: status.idleWriteP99Ms,
        migratingWriteP99Ms: status.migratingWriteP99Ms,
        targetLatencyMultiple: status.targetLatencyMultiple,
      },
    });
  }
}

function roundedMs(ms: number | null): number | null {
  return ms === null ? null : Math.round(ms * 10) / 10;
}
