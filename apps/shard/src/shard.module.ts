import { type DynamicModule, Module } from '@nestjs/common';
import type { Logger } from 'pino';
import { DatabaseModule, PlatformModule } from '@tessera/platform';
import { AutoSplitter } from './chunks/auto-splitter.service.js';
import { ChunkSizingService } from './chunks/chunk-sizing.service.js';
import { SplitVectorService } from './chunks/split-vector.service.js';
import { ChunksController } from './chunks/chunks.controller.js';
import { CollectionStorageService } from './collections/collection-storage.service.js';
import { CollectionsController } from './collections/collections.controller.js';
import { DataController } from './documents/data.controller.js';
import { ShardDataService } from './documents/shard-data.service.js';
import { IdentityController } from './identity/identity.controller.js';
import { ShardIdentityService } from './identity/shard-identity.service.js';
import { MigrationDestinationService } from './migration/migration-destination.service.js';
import { MigrationMetrics } from './migration/migration-metrics.js';
import { MigrationReporter } from './migration/migration-reporter.js';
import { MigrationSourceService } from './migration/migration-source.service.js';
import { MigrationController } from './migration/migration.controller.js';
import { RangeDeleterService } from './migration/range-deleter.service.js';
import { ShardingRuntime } from './sharding/sharding-runtime.service.js';
import type { ShardSettings } from './shard.settings.js';

/** A shard's composition root. */
@Module({})
export class ShardModule {
  static forRoot(settings: ShardSettings, logger: Logger): DynamicModule {
    return {
      module: ShardModule,
      imports: [
        PlatformModule.forRoot(settings, logger),
        DatabaseModule.forRoot({ url: settings.TESSERA_DATABASE_URL, poolSize: settings.TESSERA_DATABASE_POOL_SIZE, entities: [] }),
      ],
      controllers: [IdentityController, CollectionsController, DataController, MigrationController, ChunksController],
      providers: [
        ShardIdentityService,
        CollectionStorageService,
        ShardingRuntime,
        ShardDataService,
        ChunkSizingService,
        SplitVectorService,
        AutoSplitter,
        MigrationMetrics,
        MigrationReporter,
        RangeDeleterService,
        MigrationSourceService,
        MigrationDestinationService,
      ],
    };
  }
}
