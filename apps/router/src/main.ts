import { runNode } from '@tessera/platform';
import { ClusterTimeGossip } from './clock/cluster-time-gossip.service.js';
import { collectionHotRoutes } from './controllers/collection.routes.js';
import { CurrentOps } from './operations/current-ops.service.js';
import { QueryService } from './reads/query.service.js';
import { RouterModule } from './router.module.js';
import { routerSettingsSchema } from './router.settings.js';
import { WriteService } from './writes/write.service.js';

await runNode({
  role: 'router',
  settingsSchema: routerSettingsSchema,
  module: (settings, logger) => RouterModule.forRoot(settings, logger),
  configure: (app) => app.get(ClusterTimeGossip).install(app.getHttpAdapter().getInstance()),
  hotRoutes: (app) => collectionHotRoutes(app.get(WriteService), app.get(QueryService), app.get(CurrentOps)),
  quiesceMs: (settings) => settings.TESSERA_QUIESCE_MS,
});
