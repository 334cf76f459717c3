import { runNode } from '@tessera/platform';
import { RouterModule } from './router.module.js';
import { routerSettingsSchema } from './router.settings.js';

await runNode({
  role: 'router',
  settingsSchema: routerSettingsSchema,
  module: (settings, logger) => RouterModule.forRoot(settings, logger),
});
