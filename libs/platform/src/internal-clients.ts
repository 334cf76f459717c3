import { Inject, Injectable } from '@nestjs/common';
import type { Dispatcher } from 'undici';
import { ConfigClient, type InternalClientOptions, MigrationClient, ShardClient } from '@tessera/protocol';
import { INTERNAL_AGENT, SETTINGS } from './tokens.js';
import { VectorClockService } from './vector-clock.service.js';

/** Makes typed internal clients that sign with the cluster key, share the pool and gossip the clock. */
@Injectable()
export class InternalClients {
  constructor(
    @Inject(SETTINGS) private readonly settings: { TESSERA_CLUSTER_KEY: string },
    @Inject(INTERNAL_AGENT) private readonly agent: Dispatcher,
    private readonly clock: VectorClockService,
  ) {}

  config(url: string, timeoutMs?: number): ConfigClient {
    return new ConfigClient(url, this.options(timeoutMs));
  }

  shard(url: string, timeoutMs?: number): ShardClient {
    return new ShardClient(url, this.options(timeoutMs));
  }

  migration(url: string, timeoutMs?: number): MigrationClient {
    return new MigrationClient(url, this.options(timeoutMs));
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
