import { Inject, Injectable, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import type { Logger } from 'pino';
import type { Subscription } from 'rxjs';
import { nextRoundDelayMs } from '@tessera/core';
import type { BalancerCollectionStatus, BalancerStatus, MoveTopChunkRequest, MoveTopChunkResult } from '@tessera/protocol';
import { LOGGER, SETTINGS } from '@tessera/platform';
import { EventBusService } from '../events/event-bus.service.js';
import type { ConfigSettings } from '../config.settings.js';
import { type LeaderOnlyService, LeaderService } from '../leader/leader.service.js';
import { ClusterSettingsService } from '../settings/cluster-settings.service.js';
import { isInsideActiveWindow } from './active-window.js';
import { BalancerCollectionService } from './balancer-collection.service.js';
import { BalancerRoundService, type RoundControl } from './balancer-round.service.js';
import { BalancerSecondaryService } from './balancer-secondary.service.js';
import { BalancerMover } from './balancer-mover.service.js';
import { BalancerThrottleService } from './balancer-throttle.service.js';

/** Changelog kinds after which the balancer runs a round at once rather than at the end of its interval. */
const WAKE_UP_KINDS = new Set(['balancer.settings', 'balancer.configureCollection', 'addShard', 'removeShard.start']);

/**
 * The balancer's main loop (MongoDB's Balancer::_mainThread) on the config leader: a round
 * (`BalancerRoundService`) when the balancer is on (`mode: 'full'`) and the time is inside the
 * balancing window, then the next one at once after a round that issued migrations, else
 * `TESSERA_BALANCER_ROUND_INTERVAL_MS` later; a change that may give it work wakes it at once.
 * Under the `continuous` scheduler a round returns once its migrations are issued, and the end
 * of each one wakes the loop, so the shards it freed get their next migration at once. It
 * also starts and stops the secondary loop (`BalancerSecondaryService`), and answers
 * `balancerStatus`, `balancerCollectionStatus` and the shards' top-chunk requests
 * (`BalancerCollectionService`). See README.md beside this file.
 */
@Injectable()
export class BalancerService implements LeaderOnlyService, OnModuleInit, OnApplicationShutdown {
  readonly name = 'balancer';
  /** Bumped on every start and stop, so a round of an earlier term does not schedule another. */
  private term = 0;
  private timer: NodeJS.Timeout | undefined;
  private inRound = false;
  /** Events that start a round at once (see `wake`). */
  private wakeups: Subscription | undefined;
  private wakeAfterRound = false;
  /** The term whose `runRound` is under way (from its settings read on), if any. */
  private runningTerm: number | undefined;
  /** Ends the migration throttle's sleep early (on a wake-up or a stop); set while a round sleeps. */
  private endThrottle: (() => void) | undefined;
  /** A wake-up the load throttle asked for, once a held migration may start. */
  private throttleWake: NodeJS.Timeout | undefined;

  constructor(
    private readonly leader: LeaderService,
    private readonly clusterSettings: ClusterSettingsService,
    private readonly events: EventBusService,
    private readonly rounds: BalancerRoundService,
    private readonly secondary: BalancerSecondaryService,
    private readonly collections: BalancerCollectionService,
    private readonly throttle: BalancerThrottleService,
    private readonly mover: BalancerMover,
    @Inject(SETTINGS) private readonly settings: ConfigSettings,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  onModuleInit(): void {
    this.leader.register(this);
  }

  async startAsLeader(): Promise<void> {
    this.stopLoop();
    const term = ++this.term;
    this.wakeAfterRound = false;
    this.rounds.reset();
    this.secondary.start();
    this.throttle.start(
      () => void this.wakeIfContinuous(term),
      (pacing) => void this.mover.repace(pacing),
    );
    this.wakeups?.unsubscribe();
    this.wakeups = this.events.stream((e) => WAKE_UP_KINDS.has(e.kind), this.events.lastSeq).subscribe(() => this.wake(term));
    this.schedule(term, 0);
  }

  async stopAsLeader(): Promise<void> {
    this.stopLoop();
    this.secondary.stop();
    this.throttle.stop();
  }

  onApplicationShutdown(): void {
    this.stopLoop();
  }

  async status(): Promise<BalancerStatus> {
    const settings = await this.clusterSettings.get();
    return {
      mode: settings.balancer.mode,
      inBalancerRound: this.inRound,
      throttle: this.throttle.status(),
      lastRound: this.rounds.lastRound,
    };
  }

  /** `balancerCollectionStatus(ns)`: the policy's verdict on the collection as it is now. */
  collectionStatus(ns: string): Promise<BalancerCollectionStatus> {
    return this.collections.collectionStatus(ns);
  }

  /** A shard's request to move the top chunk it just split off (see `BalancerCollectionService.moveTopChunk`). */
  moveTopChunk(input: MoveTopChunkRequest): Promise<MoveTopChunkResult> {
    return this.collections.moveTopChunk(input);
  }

  private stopLoop(): void {
    this.wakeups?.unsubscribe();
    this.wakeups = undefined;
    this.term++;
    clearTimeout(this.timer);
    this.timer = undefined;
    clearTimeout(this.throttleWake);
    this.throttleWake = undefined;
    this.endThrottle?.();
  }

  /**
   * Starts a round now rather than at the end of the interval (MongoDB wakes its balancer when its
   * settings change): after a change of the balancer's settings or of a collection's, a shard
   * added or draining. Any config process may make the change; every one sees it on the event bus.
   * During a round, the next one follows it at once; a round that would wait for the migration
   * throttle, or is waiting, ends without issuing its migrations, so the next one selects again
   * at once with the change seen.
   */
  private wake(term: number): void {
    if (term !== this.term) return;
    // From the start of runRound, not only of the round proper: a wake-up while it reads the
    // settings must not start a second round beside it.
    if (this.runningTerm === term) {
      this.wakeAfterRound = true;
      this.endThrottle?.();
      return;
    }
    clearTimeout(this.timer);
    this.schedule(term, 0);
  }

  /** The load throttle lets more migrations run: under `continuous`, plan at once (`rounds` ignores the throttle). */
  private async wakeIfContinuous(term: number): Promise<void> {
    const settings = await this.clusterSettings.get().catch(() => undefined);
    if (settings?.balancer.scheduler === 'continuous') this.wake(term);
  }

  private schedule(term: number, delayMs: number): void {
    this.timer = setTimeout(() => void this.runRound(term), delayMs);
    this.timer.unref();
  }

  private async runRound(term: number): Promise<void> {
    if (term !== this.term) return;
    let issued = false;
    this.runningTerm = term;
    try {
      issued = await this.tick(term);
    } catch (error) {
      this.logger.warn({ err: error }, `balancer round failed: ${(error as Error).message}`);
    } finally {
      if (this.runningTerm === term) this.runningTerm = undefined;
    }
    if (term !== this.term) return;
    const woken = this.wakeAfterRound;
    this.wakeAfterRound = false;
    this.schedule(term, nextRoundDelayMs({ issuedMigrations: issued, woken }, this.settings.TESSERA_BALANCER_ROUND_INTERVAL_MS));
  }

  /**
   * A round if the balancer is on and inside its window. Answers whether the next one should
   * follow at once: the round issued migrations and waited for them (the `rounds` scheduler).
   * Under `continuous` the migrations' ends wake the loop instead.
   */
  private async tick(term: number): Promise<boolean> {
    if (!this.leader.isLeader) return false;
    const settings = await this.clusterSettings.get();
    if (settings.balancer.mode !== 'full') return false;
    if (!isInsideActiveWindow(settings.balancer.activeWindow, new Date())) return false;
    this.inRound = true;
    try {
      const issued = await this.rounds.run(settings, this.control(term));
      return issued && settings.balancer.scheduler === 'rounds';
    } finally {
      this.inRound = false;
    }
  }

  private control(term: number): RoundControl {
    return {
      isCurrent: () => term === this.term,
      isWoken: () => this.wakeAfterRound,
      sleep: (ms) => this.sleepBeforeMigrations(ms),
      onMigrationEnd: () => this.wake(term),
      wakeIn: (ms) => {
        clearTimeout(this.throttleWake);
        this.throttleWake = setTimeout(() => this.wake(term), ms);
        this.throttleWake.unref();
      },
    };
  }

  /** Sleeps `ms`, or less when `endThrottle` is called (a wake-up, a stop). */
  private sleepBeforeMigrations(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        if (this.endThrottle === done) this.endThrottle = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      timer.unref();
      this.endThrottle = done;
    });
  }
}
