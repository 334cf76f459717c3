import { type DynamicModule, Module } from '@nestjs/common';
import type { Logger } from 'pino';
import { DatabaseModule, PlatformModule } from '@tessera/platform';
import { ChangelogService } from './changelog/changelog.service.js';
import { ConfigClockService } from './clock/config-clock.service.js';
import { ClusterIdentityService } from './cluster-identity.service.js';
import type { ConfigSettings } from './config.settings.js';
import { RouterRegistryService } from './routers/router-registry.service.js';
import { RoutersController } from './routers/routers.controller.js';
import { ShardEntity } from './shards/shard.entity.js';
import { ShardMonitorService } from './shards/shard-monitor.service.js';
import { ShardRegistryService } from './shards/shard-registry.service.js';
import { ShardsController } from './shards/shards.controller.js';

/** The config server's composition root. */
@Module({})
export class ConfigServerModule {
  static forRoot(settings: ConfigSettings, logger: Logger): DynamicModule {
    return {
      module: ConfigServerModule,
      imports: [
        PlatformModule.forRoot(settings, logger),
        DatabaseModule.forRoot({ url: settings.TESSERA_DATABASE_URL, poolSize: settings.TESSERA_DATABASE_POOL_SIZE, entities: [ShardEntity] }),
      ],
      controllers: [ShardsController, RoutersController],
      providers: [ClusterIdentityService, ConfigClockService, ChangelogService, ShardMonitorService, ShardRegistryService, RouterRegistryService],
    };
  }
}
