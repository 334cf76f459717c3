import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type { Logger } from 'pino';
import { Gauge } from 'prom-client';
import { DataSource } from 'typeorm';
import type { Dispatcher } from 'undici';
import { INTERNAL_AGENT, LOGGER, MetricsService, type Periodic, SETTINGS, runPeriodically } from '@tessera/platform';
import type { ConfigSettings } from '../config.settings.js';

export interface ShardReachability {
  reachable: boolean | null;
  lastSeenAt: Date | null;
  lastError: string | null;
}

const UNKNOWN: ShardReachability = { reachable: null, lastSeenAt: null, lastError: null };

/**
 * Checks every registered shard's readiness on an interval and remembers the outcome, so the
 * registry can say which shards answer. A shard is reachable when its `/health` answered 200.
 * Transitions are logged once, not on every failed check.
 */
@Injectable()
export class ShardMonitorService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly state = new Map<string, ShardReachability>();
  private readonly reachableGauge: Gauge<'shard'>;
  private loop: Periodic | undefined;

  constructor(
    @Inject(SETTINGS) private readonly settings: ConfigSettings,
    @Inject(INTERNAL_AGENT) private readonly agent: Dispatcher,
    @Inject(LOGGER) private readonly logger: Logger,
    private readonly dataSource: DataSource,
    metrics: MetricsService,
  ) {
    this.reachableGauge = new Gauge({
      name: 'tessera_shard_reachable',
      help: '1 when the shard answered its last health check, 0 when it did not',
      labelNames: ['shard'],
      registers: [metrics.registry],
    });
  }

  onApplicationBootstrap(): void {
    this.loop = runPeriodically(
      () => this.checkAll(),
      this.settings.TESSERA_SHARD_MONITOR_INTERVAL_MS,
      (error) => this.logger.warn({ err: error }, 'shard monitor round failed'),
    );
  }

  onApplicationShutdown(): void {
    this.loop?.stop();
  }

  reachability(name: string): ShardReachability {
    return this.state.get(name) ?? UNKNOWN;
  }

  async checkAll(): Promise<void> {
    const shards: Array<{ name: string; url: string }> = await this.dataSource.query('SELECT name, url FROM shards');
    await Promise.all(shards.map((shard) => this.check(shard)));
  }

  async check(shard: { name: string; url: string }): Promise<void> {
    const previous = this.reachability(shard.name);
    const timeout = Math.min(2_000, this.settings.TESSERA_SHARD_MONITOR_INTERVAL_MS);
    let error: string | null = null;
    try {
      const response = await this.agent.request({
        origin: shard.url,
        path: '/health',
        method: 'GET',
        headersTimeout: timeout,
        bodyTimeout: timeout,
      });
      const text = await response.body.text();
      if (response.statusCode !== 200) error = `health answered HTTP ${response.statusCode}: ${text.slice(0, 300)}`;
    } catch (e) {
      error = (e as { code?: string }).code ?? (e as Error).message;
    }
    const reachable = error === null;
    this.state.set(shard.name, { reachable, lastSeenAt: reachable ? new Date() : previous.lastSeenAt, lastError: error });
    this.reachableGauge.set({ shard: shard.name }, reachable ? 1 : 0);
    if (previous.reachable !== false && !reachable) {
      this.logger.warn({ shard: shard.name, url: shard.url, error }, `shard ${shard.name} is unreachable: ${error}`);
    } else if (previous.reachable === false && reachable) {
      this.logger.info({ shard: shard.name }, `shard ${shard.name} is reachable again`);
    }
  }
}
