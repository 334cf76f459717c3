import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import type { ConfigClient } from '@tessera/protocol';
import { HealthService, InternalClients, LOGGER, type Periodic, SETTINGS, advertisedUrl, runPeriodically } from '@tessera/platform';
import type { RouterSettings } from './router.settings.js';

export const TESSERA_VERSION = '0.1.0';

/**
 * Registers this router with the config server and pings on an interval, as mongos does in
 * config.mongos. Readiness requires the last ping to have succeeded: a router that cannot
 * reach the config server cannot route.
 */
@Injectable()
export class RouterRegistrationService implements OnModuleInit, OnApplicationBootstrap, OnApplicationShutdown {
  private readonly config: ConfigClient;
  private readonly startedAt = new Date().toISOString();
  private readonly id: string;
  private readonly url: string;
  private lastError: string | null = 'not registered yet';
  private clusterId: string | null = null;
  private loop: Periodic | undefined;

  constructor(
    @Inject(SETTINGS) private readonly settings: RouterSettings,
    @Inject(LOGGER) private readonly logger: Logger,
    private readonly health: HealthService,
    clients: InternalClients,
  ) {
    this.config = clients.config(settings.TESSERA_CONFIG_URL, 5_000);
    this.url = advertisedUrl(settings);
    this.id = `${hostname()}:${settings.TESSERA_PORT}`;
  }

  onModuleInit(): void {
    this.health.register({
      name: 'configServer',
      check: async () => {
        if (this.lastError !== null) throw new Error(`config server ${this.config.url}: ${this.lastError}`);
      },
    });
  }

  onApplicationBootstrap(): void {
    this.loop = runPeriodically(
      () => this.ping(),
      this.settings.TESSERA_ROUTER_PING_INTERVAL_MS,
      () => undefined,
    );
  }

  onApplicationShutdown(): void {
    this.loop?.stop();
  }

  get cluster(): string | null {
    return this.clusterId;
  }

  /** This router's id in the registry (host:port). */
  get routerId(): string {
    return this.id;
  }

  private async ping(): Promise<void> {
    try {
      const info = await this.config.pingRouter({ id: this.id, url: this.url, version: TESSERA_VERSION, startedAt: this.startedAt });
      if (this.clusterId === null) this.logger.info({ clusterId: info.clusterId }, `registered with config server ${this.config.url}`);
      this.clusterId = info.clusterId;
      this.lastError = null;
    } catch (error) {
      const message = (error as Error).message;
      if (this.lastError !== message) this.logger.warn({ err: error }, `cannot reach config server: ${message}`);
      this.lastError = message;
    }
  }
}
