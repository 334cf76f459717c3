import { type DynamicModule, Global, Inject, Module, type OnApplicationShutdown } from '@nestjs/common';
import type { Logger } from 'pino';
import type { Agent } from 'undici';
import { createInternalAgent } from '@tessera/protocol';
import { Failpoints } from './failpoints.js';
import { HealthController, HealthService } from './health.js';
import { MetricsController, MetricsService } from './metrics.js';
import { InternalClients } from './internal-clients.js';
import { INTERNAL_AGENT, LOGGER, SETTINGS } from './tokens.js';
import { VectorClockService } from './vector-clock.service.js';
import { type TlsFiles, trustedCa } from './tls.js';

class InternalAgentCloser implements OnApplicationShutdown {
  constructor(@Inject(INTERNAL_AGENT) private readonly agent: Agent) {}

  async onApplicationShutdown(): Promise<void> {
    await this.agent.close();
  }
}

/** What every node has: settings, logger, health, metrics, the vector clock and internal clients. */
@Global()
@Module({})
export class PlatformModule {
  static forRoot(settings: object, logger: Logger): DynamicModule {
    return {
      module: PlatformModule,
      controllers: [HealthController, MetricsController],
      providers: [
        { provide: SETTINGS, useValue: settings },
        { provide: LOGGER, useValue: logger },
        { provide: INTERNAL_AGENT, useFactory: () => createInternalAgent({ ca: trustedCa(settings as TlsFiles) }) },
        InternalAgentCloser,
        HealthService,
        MetricsService,
        VectorClockService,
        InternalClients,
        Failpoints,
      ],
      exports: [SETTINGS, LOGGER, INTERNAL_AGENT, HealthService, MetricsService, VectorClockService, InternalClients, Failpoints],
    };
  }
}
