import { runNode } from '@tessera/platform';
import { installAccessControl } from './auth/access-hooks.js';
import { RouterAudit } from './auth/router-audit.service.js';
import { installRateLimit } from './auth/rate-limit.js';
import { RouterAuthentication } from './auth/router-authentication.service.js';
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
  configure: async (app, { settings, logger }) => {
    const fastify = app.getHttpAdapter().getInstance();
    if (settings.TESSERA_AUTHORIZATION === 'enabled') installAccessControl(fastify, app.get(RouterAuthentication), app.get(RouterAudit), logger);
    if (settings.TESSERA_RATE_LIMIT_PER_SECOND > 0) await installRateLimit(app, settings.TESSERA_RATE_LIMIT_PER_SECOND, logger);
    app.get(ClusterTimeGossip).install(fastify);
  },
  hotRoutes: (app) => collectionHotRoutes(app.get(WriteService), app.get(QueryService), app.get(CurrentOps)),
  quiesceMs: (settings) => settings.TESSERA_QUIESCE_MS,
});
