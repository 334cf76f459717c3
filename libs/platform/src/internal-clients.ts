import { Inject, Injectable, type OnApplicationShutdown } from '@nestjs/common';
import type { Logger } from 'pino';
import type { Dispatcher } from 'undici';
import { ConfigClient, type InternalClientOptions, MigrationClient, ShardClient, WireAgent } from '@tessera/protocol';
import { INTERNAL_AGENT, LOGGER, SETTINGS } from './tokens.js';
import { VectorClockService } from './vector-clock.service.js';

/**
 * Makes typed internal clients that sign with the cluster key, share the pool and gossip the
 * clock. Shard clients travel over the process's wire connections unless
 * `TESSERA_SHARD_TRANSPORT` is `http`.
 */
@Injectable()
export class InternalClients implements OnApplicationShutdown {
  private readonly wire: WireAgent | undefined;

  constructor(
    @Inject(SETTINGS)
    private readonly settings: {
      TESSERA_CLUSTER_KEY: string;
      TESSERA_SHARD_TRANSPORT: 'wire' | 'http';
      TESSERA_SHUTDOWN_TIMEOUT_MS: number;
    },
    @Inject(INTERNAL_AGENT) private readonly agent: Dispatcher,
    private readonly clock: VectorClockService,
    @Inject(LOGGER) logger: Logger,
  ) {
    this.wire =
      settings.TESSERA_SHARD_TRANSPORT === 'wire'
        ? new WireAgent({
            clusterKey: settings.TESSERA_CLUSTER_KEY,
            onFallback: (origin, reason) =>
              logger.warn({ url: origin, reason }, `${origin} is sent its requests over HTTP for a minute: ${reason}`),
          })
        : undefined;
  }

  config(url: string, timeoutMs?: number): ConfigClient {
    return new ConfigClient(url, this.options(timeoutMs));
  }

  shard(url: string, timeoutMs?: number): ShardClient {
    return new ShardClient(url, { ...this.options(timeoutMs), ...(this.wire ? { wire: this.wire } : {}) });
  }

  migration(url: string, timeoutMs?: number): MigrationClient {
    return new MigrationClient(url, this.options(timeoutMs));
  }

  /** Waits for the wire's requests in flight for half the shutdown's time, leaving the rest to fail them cleanly. */
  async onApplicationShutdown(): Promise<void> {
    await this.wire?.close(this.settings.TESSERA_SHUTDOWN_TIMEOUT_MS / 2);
  }

  private options(timeoutMs: number | undefined): InternalClientOptions {
    return {
      clusterKey: this.settings.TESSERA_CLUSTER_KEY,
      dispatcher: this.agent,
      gossip: this.clock,
      ...(timeoutMs ? { timeoutMs } : {}),
    };
  }
}
