import { ClusterTimeGossip } from './clock/cluster-time-gossip.service.js';
import { RouterAudit } from './auth/router-audit.service.js';
import { RouterAuthentication } from './auth/router-authentication.service.js';
import { type DynamicModule, Module } from '@nestjs/common';
import type { Logger } from 'pino';
import { PlatformModule } from '@tessera/platform';
import { BulkWriteController } from './controllers/bulk-write.controller.js';
import { CollectionController } from './controllers/collection.controller.js';
import { CursorsController } from './controllers/cursors.controller.js';
import { DocumentsController } from './controllers/documents.controller.js';
import { IndexesController } from './controllers/indexes.controller.js';
import { OpenApiController } from './controllers/openapi.controller.js';
import { DocumentsService } from './documents/documents.service.js';
import { HelloController } from './hello.controller.js';
import { IndexesService } from './indexes/indexes.service.js';
import { AggregateService } from './reads/aggregate.service.js';
import { QueryService } from './reads/query.service.js';
import { RouterRegistrationService } from './router-registration.service.js';
import { SessionsController } from './controllers/sessions.controller.js';
import { TransactionsController } from './controllers/transactions.controller.js';
import { TransactionRouter } from './transactions/transaction-router.service.js';
import { RouterSessions } from './sessions/router-sessions.service.js';
import type { RouterSettings } from './router.settings.js';
import { ClusterRoutingService } from './routing/cluster-routing.service.js';
import { BulkWriteService } from './writes/bulk-write.service.js';
import { FindAndModifyService } from './writes/find-and-modify.service.js';
import { CurrentOps } from './operations/current-ops.service.js';
import { ForegroundLoadService } from './load/foreground-load.service.js';
import { OutStage } from './reads/out-stage.js';
import { DdlController } from './controllers/ddl.controller.js';
import { WriteService } from './writes/write.service.js';
import { WriteWithoutShardKeyService } from './writes/write-without-shard-key.service.js';

/**
 * Every controller of the public API. DocumentsController comes before CollectionController
 * only for readability; their paths do not overlap. The openapi spec test walks this list.
 */
export const ROUTER_CONTROLLERS = [
  HelloController,
  OpenApiController,
  CollectionController,
  DocumentsController,
  IndexesController,
  CursorsController,
  SessionsController,
  TransactionsController,
  BulkWriteController,
  DdlController,
];

/** A router's composition root. Routers are stateless: no database of their own. */
@Module({})
export class RouterModule {
  static forRoot(settings: RouterSettings, logger: Logger): DynamicModule {
    return {
      module: RouterModule,
      imports: [PlatformModule.forRoot(settings, logger)],
      controllers: ROUTER_CONTROLLERS,
      providers: [
        RouterRegistrationService,
        ClusterRoutingService,
        RouterSessions,
        QueryService,
        AggregateService,
        OutStage,
        TransactionRouter,
        WriteService,
        WriteWithoutShardKeyService,
        FindAndModifyService,
        CurrentOps,
        ForegroundLoadService,
        BulkWriteService,
        DocumentsService,
        IndexesService,
        ClusterTimeGossip,
        RouterAuthentication,
        RouterAudit,
      ],
    };
  }
}
