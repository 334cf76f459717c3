import { type DynamicModule, Module } from '@nestjs/common';
import type { Logger } from 'pino';
import { DatabaseModule, PlatformModule } from '@tessera/platform';
import { CollectionStorageService } from './collections/collection-storage.service.js';
import { CollectionsController } from './collections/collections.controller.js';
import { DataController } from './documents/data.controller.js';
import { ShardDataService } from './documents/shard-data.service.js';
import { IdentityController } from './identity/identity.controller.js';
import { ShardIdentityService } from './identity/shard-identity.service.js';
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
      controllers: [IdentityController, CollectionsController, DataController],
      providers: [ShardIdentityService, CollectionStorageService, ShardDataService],
    };
  }
}
