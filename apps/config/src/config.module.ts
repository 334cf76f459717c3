import { type DynamicModule, Module } from '@nestjs/common';
import { GraphQLModule } from '@nestjs/graphql';
import type { ApolloDriverConfig } from '@nestjs/apollo';
import type { Logger } from 'pino';
import { DatabaseModule, PlatformModule } from '@tessera/platform';
import { BalancerController } from './balancer/balancer.controller.js';
import { AccessControlService } from './access/access-control.service.js';
import { AccessController } from './access/access.controller.js';
import { AccessStore } from './access/access.store.js';
import { AuditFeed } from './access/audit-feed.service.js';
import { ConfigAuthentication } from './access/config-authentication.service.js';
import { BALANCER_PROVIDERS } from './balancer/balancer.providers.js';
import { CatalogController } from './catalog/catalog.controller.js';
import { CatalogReadService } from './catalog/catalog-read.service.js';
import { MetadataCommitService } from './catalog/metadata-commit.service.js';
import { ChangelogController } from './changelog/changelog.controller.js';
import { ChangelogRetentionService } from './changelog/changelog-retention.service.js';
import { ChangelogService } from './changelog/changelog.service.js';
import { ClusterTimeKeysController } from './clock/cluster-time-keys.controller.js';
import { ClusterTimeKeysService } from './clock/cluster-time-keys.service.js';
import { ClusterTimeKeysStore } from './clock/cluster-time-keys.store.js';
import { ConfigClockService } from './clock/config-clock.service.js';
import { ClusterIdentityService } from './cluster-identity.service.js';
import { CollectionDdlService } from './ddl/collection-ddl.service.js';
import { CollectionCatalogStore } from './ddl/collection-catalog.store.js';
import { DropCollectionCoordinator } from './ddl/drop-collection.coordinator.js';
import { RenameCollectionCoordinator } from './ddl/rename-collection.coordinator.js';
import { RefineShardKeyCoordinator } from './ddl/refine-shard-key.coordinator.js';
import { ShardCollectionCoordinator } from './ddl/shard-collection.coordinator.js';
import { ShardDirectory } from './ddl/shard-directory.js';
import { CollectionDropper } from './ddl/collection-dropper.js';
import { DatabaseDdlService } from './ddl/database-ddl.service.js';
import { DdlCoordinatorStore } from './ddl/ddl-coordinator.store.js';
import { DatabaseCatalogStore } from './ddl/database-catalog.store.js';
import { DropDatabaseCoordinator } from './ddl/drop-database.coordinator.js';
import { MovePrimaryCoordinator } from './ddl/move-primary.coordinator.js';
import { DdlController, LeaderController } from './ddl/ddl.controller.js';
import { DdlCoordinatorService } from './ddl/ddl-coordinator.service.js';
import { EventBusService } from './events/event-bus.service.js';
import { CONTROL_PLANE_RESOLVERS } from './control-plane/control-plane-schema.js';
import { ControlPlaneCommandsService } from './control-plane/control-plane-commands.service.js';
import { ControlPlaneReadsService } from './control-plane/control-plane-reads.service.js';
import { GraphiqlController } from './control-plane/graphiql.controller.js';
import { EventsGateway } from './control-plane/events.gateway.js';
import { graphqlOptions } from './control-plane/graphql-options.js';
import { LeaderService } from './leader/leader.service.js';
import { ChunkCatalogStore } from './catalog/chunk-catalog.store.js';
import { ActiveMigrationStore } from './migration/active-migration.store.js';
import { MigrationManagerService } from './migration/migration-manager.service.js';
import { MigrationRecordsService } from './migration/migration-records.service.js';
import { MigrationsController } from './migration/migrations.controller.js';
import { DistLockService } from './locks/dist-lock.service.js';
import { ZonesService } from './zones/zones.service.js';
import type { ConfigSettings } from './config.settings.js';
import { RouterRegistryService } from './routers/router-registry.service.js';
import { RoutersController } from './routers/routers.controller.js';
import { ClusterSettingsService } from './settings/cluster-settings.service.js';
import { SettingsController } from './settings/settings.controller.js';
import { ShardEntity } from './shards/shard.entity.js';
import { ShardMonitorService } from './shards/shard-monitor.service.js';
import { ShardRegistryService } from './shards/shard-registry.service.js';
import { ShardsController } from './shards/shards.controller.js';
import { SessionExpiryService } from './sessions/session-expiry.service.js';
import { SessionMetricsService } from './sessions/session-metrics.service.js';
import { SessionsController } from './sessions/sessions.controller.js';
import { SessionsService } from './sessions/sessions.service.js';
import { ClusterTransactions } from './transactions/cluster-transactions.service.js';
import { SessionsStore } from './sessions/sessions.store.js';

/** The config server's composition root. */
@Module({})
export class ConfigServerModule {
  // Long: the list of every controller and provider of the process, which is all it is.
  static forRoot(settings: ConfigSettings, logger: Logger): DynamicModule {
    return {
      module: ConfigServerModule,
      imports: [
        PlatformModule.forRoot(settings, logger),
        DatabaseModule.forRoot({
          url: settings.TESSERA_DATABASE_URL,
          poolSize: settings.TESSERA_DATABASE_POOL_SIZE,
          entities: [ShardEntity],
        }),
        GraphQLModule.forRoot<ApolloDriverConfig>(graphqlOptions(settings, logger)),
      ],
      controllers: [
        ShardsController,
        RoutersController,
        DdlController,
        LeaderController,
        CatalogController,
        MigrationsController,
        ChangelogController,
        SettingsController,
        BalancerController,
        SessionsController,
        ClusterTimeKeysController,
        AccessController,
        ...(settings.TESSERA_GRAPHQL_DEVELOPMENT ? [GraphiqlController] : []),
      ],
      providers: [
        ClusterIdentityService,
        ConfigClockService,
        ClusterTimeKeysStore,
        ClusterTimeKeysService,
        ChangelogService,
        ChangelogRetentionService,
        ShardMonitorService,
        ShardRegistryService,
        RouterRegistryService,
        DistLockService,
        LeaderService,
        DdlCoordinatorStore,
        DdlCoordinatorService,
        CollectionDropper,
        DatabaseCatalogStore,
        DatabaseDdlService,
        DropDatabaseCoordinator,
        MovePrimaryCoordinator,
        CollectionCatalogStore,
        ShardDirectory,
        ShardCollectionCoordinator,
        DropCollectionCoordinator,
        RenameCollectionCoordinator,
        RefineShardKeyCoordinator,
        CollectionDdlService,
        ZonesService,
        CatalogReadService,
        MetadataCommitService,
        ActiveMigrationStore,
        ChunkCatalogStore,
        MigrationManagerService,
        MigrationRecordsService,
        ClusterSettingsService,
        ...BALANCER_PROVIDERS,
        AccessStore,
        AccessControlService,
        AuditFeed,
        ConfigAuthentication,
        SessionsStore,
        SessionsService,
        ClusterTransactions,
        SessionExpiryService,
        SessionMetricsService,
        EventBusService,
        ControlPlaneReadsService,
        ControlPlaneCommandsService,
        ...CONTROL_PLANE_RESOLVERS,
        EventsGateway,
      ],
    };
  }
}
