import { configMigrations } from '@tessera/migrations';
import { runMigrations, runNode } from '@tessera/platform';
import { ConfigServerModule } from './config.module.js';
import { configSettingsSchema } from './config.settings.js';
import { BUILT_DASHBOARD_DIR, serveDashboard } from './dashboard/serve-dashboard.js';

await runNode({
  role: 'config',
  settingsSchema: configSettingsSchema,
  prepare: async (settings, logger) => {
    const applied = await runMigrations(settings.TESSERA_DATABASE_URL, configMigrations);
    if (applied.length > 0) logger.info({ applied }, `applied ${applied.length} config migration(s)`);
  },
  module: (settings, logger) => ConfigServerModule.forRoot(settings, logger),
  configure: (app, { settings, logger, url }) => serveDashboard(app, settings.TESSERA_DASHBOARD_DIR ?? BUILT_DASHBOARD_DIR, logger, url),
});
