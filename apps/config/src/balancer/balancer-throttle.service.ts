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
  isThrottled,
  migrationGate,
  observeForegroundLoad,
} from '@tessera/core';
import type { BalancerThrottleStatus, ClonePacing } from '@tessera/protocol';
import { LOGGER, type Periodic, SETTINGS, runPeriodically } from '@tessera/platform';
import { ChangelogService } from '../changelog/changelog.service.js';
import { ActiveMigrationStore } from '../migration/active-migration.store.js';
import type { ConfigSettings } from '../config.settings.js';
import { ForegroundLoadStore, type StoredLoadReport } from './foreground-load.store.js';

/** The window `currentBytesPerSecond` is measured over, and how long the in-flight counts are kept. */
const RATE_WINDOW_MS = 10_000;

/**
 * The continuous scheduler's throttle on the leader (libs/core load-throttle.ts): it reads the
 * routers' foreground load reports every `TESSERA_BALANCER_LOAD_POLL_MS`, tells for each window
 * whether a migration ran during it (`BalancerMover` reports the starts and ends of the
 * balancer's here; any other, a user's moveRange or one issued through another config server,
 * shows as a record in `active_migrations` at a poll), keeps the throttle's state, and answers
 * whether a migration may start now. Only windows without any migration teach the idle p99. Each
 * change between full speed and throttled is a `balancer.throttle` changelog row with its reason
 * and latencies; each change of the clone pacing goes to the migrations under way (`repaced`).
 */
@Injectable()
export class BalancerThrottleService {
  private state: LoadThrottleState = INITIAL_LOAD_THROTTLE_STATE;
  private readonly limits: LoadThrottleSettings;
  private readonly pollMs: number;
  private inFlight = 0;
  /** Each change of `inFlight` within RATE_WINDOW_MS, and the last one before: how many ran at once when. */
  private inFlightLog: Array<{ atMs: number; inFlight: number }> = [];
  private lastEndMs: number | null = null;
  private lastStart: { atMs: number; bytes: number } | null = null;
  /** Migrations ended within RATE_WINDOW_MS, with the bytes they cloned. */
  private recentlyMoved: Array<{ atMs: number; bytes: number }> = [];
  /** The newest report read (the database's `window_end`). */
  private readSince: string | null = null;
  private loop: Periodic | undefined;
  private opened: () => void = () => undefined;
  private repaced: (pacing: ClonePacing | undefined) => void = () => undefined;
  /** Migrations recorded at the last poll: one there then ran during the windows read since. */
  private recordedAtLastPoll = 0;

  constructor(
    private readonly reports: ForegroundLoadStore,
    private readonly records: ActiveMigrationStore,
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

  /**
   * A new term: the state is learned afresh, from the reports made from now on. `opened` is
   * called when the throttle lets more migrations run than before (a pause ended, the
   * concurrency limit grew or went), so the scheduler can plan at once; `repaced` when the clone
   * pacing changed, so the migrations under way can follow it.
   */
  start(opened: () => void = () => undefined, repaced: (pacing: ClonePacing | undefined) => void = () => undefined): void {
    this.stop();
    this.opened = opened;
    this.repaced = repaced;
    this.state = INITIAL_LOAD_THROTTLE_STATE;
    this.readSince = null;
    let first = true;
    this.loop = runPeriodically(
      async () => {
        // The first read only finds where the reports stand: older windows say nothing of now.
        const reports = await this.reports.since(this.readSince);
        const recorded = await this.records.count();
        if (reports.length > 0) this.readSince = reports.at(-1)!.windowEnd;
        if (first) first = false;
        else await this.observe(reports, recorded + this.recordedAtLastPoll > 0);
        this.recordedAtLastPoll = recorded;
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
    this.logInFlight(now, ++this.inFlight);
    this.lastStart = { atMs: now, bytes };
  }

  /** A balancer migration ended now, having cloned `bytes` (0 when it failed). */
  ended(bytes: number): void {
    const now = Date.now();
    this.inFlight = Math.max(0, this.inFlight - 1);
    this.logInFlight(now, this.inFlight);
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
      state: isThrottled(this.state) ? 'throttled' : 'fullSpeed',
      reason: this.state.reason,
      pauseMs: this.state.pauseMs,
      cloneShare: this.state.cloneShare,
      idleWriteP99Ms: roundedMs(this.state.idleP99Ms),
      migratingWriteP99Ms: roundedMs(this.state.migratingP99Ms),
      targetLatencyMultiple: this.limits.targetLatencyMultiple,
      maxBytesPerSecond: this.limits.maxBytesPerSecond,
      currentBytesPerSecond: Math.round(moved / (RATE_WINDOW_MS / 1000)),
      migrationsInFlight: this.inFlight,
      concurrencyLimit: this.state.concurrency,
    };
  }

  /**
   * One poll's reports, summed over routers: a window counts as migrating when a balancer
   * migration ran during it, or when `recorded` (a migration was recorded at this poll or the last).
   */
  private async observe(reports: readonly StoredLoadReport[], recorded: boolean): Promise<void> {
    const now = Date.now();
    const withWrites = reports.filter((r) => r.p99Ms !== null);
    const writes = reports.reduce((n, r) => n + r.writes, 0);
    const inFlight = reports.reduce((n, r) => n + r.inFlight, 0);
    const p99Ms = withWrites.length === 0 ? null : Math.max(...withWrites.map((r) => r.p99Ms!));
    const peakMigrations = Math.max(0, ...reports.map((r) => this.peakInFlight(now - r.ageMs - r.windowMs, now - r.ageMs)));
    const before = this.state;
    this.state = observeForegroundLoad(
      before,
      { writes, p99Ms, inFlight, migrating: peakMigrations > 0 || recorded, peakMigrations },
      this.limits,
    );
    if (isThrottled(before) !== isThrottled(this.state)) await this.recordChange();
    if (allowsMore(before, this.state)) this.opened();
    const pacing = clonePacingOf(this.state);
    if (JSON.stringify(pacing) !== JSON.stringify(clonePacingOf(before))) this.repaced(pacing);
  }

  private logInFlight(atMs: number, inFlight: number): void {
    const kept = this.inFlightLog.filter((e) => atMs - e.atMs < RATE_WINDOW_MS);
    const before = this.inFlightLog.filter((e) => atMs - e.atMs >= RATE_WINDOW_MS).at(-1);
    this.inFlightLog = [...(before ? [before] : []), ...kept, { atMs, inFlight }];
  }

  /** The most balancer migrations in flight at once between `startMs` and `endMs`. */
  private peakInFlight(startMs: number, endMs: number): number {
    const atStart = this.inFlightLog.filter((e) => e.atMs <= startMs).at(-1)?.inFlight ?? 0;
    const during = this.inFlightLog.filter((e) => e.atMs > startMs && e.atMs <= endMs).map((e) => e.inFlight);
    return Math.max(atStart, ...during);
  }

  private async recordChange(): Promise<void> {
    const status = this.status();
    await this.changelog.record(this.dataSource.manager, {
      what: 'balancer.throttle',
      details: {
        state: status.state,
        reason: status.reason,
        pauseMs: status.pauseMs,
        cloneShare: status.cloneShare,
        idleWriteP99Ms: status.idleWriteP99Ms,
        migratingWriteP99Ms: status.migratingWriteP99Ms,
        targetLatencyMultiple: status.targetLatencyMultiple,
      },
    });
  }
}

/** Whether `after` lets more migrations run than `before`: a pause gone, or a higher (or no) concurrency limit. */
function allowsMore(before: LoadThrottleState, after: LoadThrottleState): boolean {
  const limit = (s: LoadThrottleState) => (s.pauseMs > 0 ? 1 : (s.concurrency ?? Number.POSITIVE_INFINITY));
  return limit(after) > limit(before);
}

function roundedMs(ms: number | null): number | null {
  return ms === null ? null : Math.round(ms * 10) / 10;
}
