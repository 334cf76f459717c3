import { runNode } from '@tessera/platform';
import { collectionHotRoutes } from './controllers/collection.routes.js';
import { QueryService } from './reads/query.service.js';
import { RouterModule } from './router.module.js';
import { routerSettingsSchema } from './router.settings.js';
import { WriteService } from './writes/write.service.js';

await runNode({
  role: 'router',
  settingsSchema: routerSettingsSchema,
  module: (settings, logger) => RouterModule.forRoot(settings, logger),
  hotRoutes: (app) => collectionHotRoutes(app.get(WriteService), app.get(QueryService)),
});
