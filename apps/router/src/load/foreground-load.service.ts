import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type { Logger } from 'pino';
import { percentile } from '@tessera/core';
import type { ConfigClient } from '@tessera/protocol';
import { InternalClients, LOGGER, type Periodic, SETTINGS, runPeriodically } from '@tessera/platform';
import { RouterRegistrationService } from '../router-registration.service.js';
import type { RouterSettings } from '../router.settings.js';

/** Latencies kept per window; past it each new one replaces a random kept one (a uniform sample). */
const MAX_SAMPLES = 10_000;

/**
 * The router's foreground writes (inserts, updates, deletes, findAndModify, bulkWrite): how many
 * completed in each window of `TESSERA_ROUTER_LOAD_REPORT_INTERVAL_MS`, their p99 and how many
 * are still running at its end, reported to the config server, whose balancer slows its
 * migrations while they hurt the writes (libs/core load-throttle.ts). A failed report is
 * dropped: the next window's follows.
 */
@Injectable()
export class ForegroundLoadService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly config: ConfigClient;
  private samples: number[] = [];
  private writes = 0;
  private inFlight = 0;
  private windowStart = Date.now();
  private loop: Periodic | undefined;

  constructor(
    @Inject(SETTINGS) private readonly settings: RouterSettings,
    @Inject(LOGGER) private readonly logger: Logger,
    private readonly registration: RouterRegistrationService,
    clients: InternalClients,
  ) {
    this.config = clients.config(settings.TESSERA_CONFIG_URL, 5_000);
  }

  onApplicationBootstrap(): void {
    const interval = this.settings.TESSERA_ROUTER_LOAD_REPORT_INTERVAL_MS;
    if (interval > 0)
      this.loop = runPeriodically(
        () => this.report(),
        interval,
        () => undefined,
      );
  }

  onApplicationShutdown(): void {
    this.loop?.stop();
  }

  /** A write starts; `recordWrite` ends it. */
  writeStarted(): void {
    this.inFlight++;
  }

  /** One write completed (or failed) after `ms`. */
  recordWrite(ms: number): void {
    this.inFlight = Math.max(0, this.inFlight - 1);
    this.writes++;
    if (this.samples.length < MAX_SAMPLES) this.samples.push(ms);
    else {
      const slot = Math.floor(Math.random() * this.writes);
      if (slot < MAX_SAMPLES) this.samples[slot] = ms;
    }
  }

  /** Ends the current window and reports it. */
  private async report(): Promise<void> {
    const samples = this.samples.sort((a, b) => a - b);
    const writes = this.writes;
    const windowMs = Math.max(1, Date.now() - this.windowStart);
    this.samples = [];
    this.writes = 0;
    this.windowStart = Date.now();
    const p99Ms = samples.length === 0 ? null : percentile(samples, 99);
    try {
      await this.config.reportForegroundLoad({ router: this.registration.routerId, windowMs, writes, p99Ms, inFlight: this.inFlight });
    } catch (error) {
      this.logger.debug({ err: error }, `foreground load report failed: ${(error as Error).message}`);
    }
  }
}
