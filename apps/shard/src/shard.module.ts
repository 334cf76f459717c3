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
import { DatabaseCriticalSectionStore } from './databases/database-critical-section.store.js';
import { DatabaseCriticalSections } from './databases/database-critical-sections.service.js';
import { DatabasesController } from './databases/databases.controller.js';
import { MovePrimaryDonor } from './databases/move-primary-donor.service.js';
import { MovePrimaryRecipient } from './databases/move-primary-recipient.service.js';
import { CollectionResolver } from './documents/collection-resolver.js';
import { ShardDataService } from './documents/shard-data.service.js';
import { ShardClockStore } from './history/shard-clock.store.js';
import { SnapshotHistory } from './history/snapshot-history.service.js';
import { WriteTimes } from './history/write-times.service.js';
import { IdentityController } from './identity/identity.controller.js';
import { ShardIdentityService } from './identity/shard-identity.service.js';
import { DonorPreconditions } from './migration/donor-preconditions.js';
import { IncomingRangeStore } from './migration/incoming-range.store.js';
import { IncomingSessionHistory } from './migration/incoming-session-history.js';
import { MigrationCloner } from './migration/migration-cloner.js';
import { MigrationCoordinator } from './migration/migration-coordinator.js';
import { MigrationCoordinatorStore } from './migration/migration-coordinator.store.js';
import { MigrationDestinationService } from './migration/migration-destination.service.js';
import { MigrationMetrics } from './migration/migration-metrics.js';
import { MigrationModsStore } from './migration/migration-mods.store.js';
import { MigrationPeers } from './migration/migration-peers.js';
import { MigrationRecipientCloner } from './migration/migration-recipient-cloner.js';
import { MigrationRecipientStore } from './migration/migration-recipient.store.js';
import { MigrationRecovery } from './migration/migration-recovery.js';
import { MigrationRegistryStore } from './migration/migration-registry.store.js';
import { MigrationReporter } from './migration/migration-reporter.js';
import { MigrationSourceManager } from './migration/migration-source-manager.js';
import { MigrationSourceService } from './migration/migration-source.service.js';
import { MigrationController } from './migration/migration.controller.js';
import { RangeDeleterService } from './migration/range-deleter.service.js';
import { RangeDeletionStore } from './migration/range-deletion.store.js';
import { RetryableWriteService } from './sessions/retryable-write.service.js';
import { SessionCatalog } from './sessions/session-catalog.js';
import { SessionRecords } from './sessions/session-records.service.js';
import { ShardSessions } from './sessions/shard-sessions.service.js';
import { TransactionsStore } from './sessions/transactions.store.js';
import { ShardingRuntime } from './sharding/sharding-runtime.service.js';
import type { ShardSettings } from './shard.settings.js';
import { CoordinatorStore } from './transactions/coordinator.store.js';
import { ParticipantStore } from './transactions/participant.store.js';
import { TransactionCoordinator } from './transactions/transaction-coordinator.service.js';
import { PeerRecovery } from './transactions/peer-recovery.js';
import { TransactionResolver } from './transactions/transaction-resolver.js';
import { TransactionParticipants } from './transactions/transaction-participants.service.js';
import { TransactionReporter } from './transactions/transaction-reporter.js';
import { TransactionsController } from './transactions/transactions.controller.js';

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
      controllers: [
        IdentityController,
        CollectionsController,
        DatabasesController,
        DataController,
        MigrationController,
        ChunksController,
        TransactionsController,
      ],
      providers: [
        ShardIdentityService,
        ShardClockStore,
        WriteTimes,
        SnapshotHistory,
        CollectionStorageService,
        ShardingRuntime,
        CollectionResolver,
        ShardDataService,
        SessionCatalog,
        SessionRecords,
        ShardSessions,
        TransactionsStore,
        RetryableWriteService,
        ParticipantStore,
        TransactionParticipants,
        PeerRecovery,
        TransactionResolver,
        CoordinatorStore,
        TransactionCoordinator,
        TransactionReporter,
        ChunkSizingService,
        SplitVectorService,
        AutoSplitter,
        MigrationMetrics,
        MigrationReporter,
        MigrationRegistryStore,
        RangeDeletionStore,
        MigrationCoordinatorStore,
        MigrationRecipientStore,
        MigrationModsStore,
        IncomingRangeStore,
        RangeDeleterService,
        MigrationPeers,
        MigrationCloner,
        IncomingSessionHistory,
        MigrationCoordinator,
        MigrationRecovery,
        DonorPreconditions,
        MigrationSourceManager,
        MigrationSourceService,
        MigrationRecipientCloner,
        MigrationDestinationService,
        DatabaseCriticalSectionStore,
        DatabaseCriticalSections,
        MovePrimaryDonor,
        MovePrimaryRecipient,
      ],
    };
  }
}
