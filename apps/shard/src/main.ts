import { shardMigrations } from '@tessera/migrations';
import { runMigrations, runNode } from '@tessera/platform';
import { dataHotRoutes } from './documents/data.routes.js';
import { ShardDataService } from './documents/shard-data.service.js';
import { ShardModule } from './shard.module.js';
import { shardSettingsSchema } from './shard.settings.js';

await runNode({
  role: 'shard',
  settingsSchema: shardSettingsSchema,
  prepare: async (settings, logger) => {
    const applied = await runMigrations(settings.TESSERA_DATABASE_URL, shardMigrations);
    if (applied.length > 0) logger.info({ applied }, `applied ${applied.length} shard migration(s)`);
  },
  module: (settings, logger) => ShardModule.forRoot(settings, logger),
  hotRoutes: (app) => dataHotRoutes(app.get(ShardDataService)),
  wire: true,
});
