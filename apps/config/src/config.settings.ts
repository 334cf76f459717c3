import { z } from 'zod';
import { commonSettingsShape, databaseSettingsShape, millisecondsSetting } from '@tessera/platform';

/** The config server's settings; README.md documents each with its default. */
export const configSettingsSchema = z.object({
  ...commonSettingsShape(7080),
  ...databaseSettingsShape,
  /** How often the config server checks that each shard answers. */
  TESSERA_SHARD_MONITOR_INTERVAL_MS: millisecondsSetting(5_000),
});

export type ConfigSettings = z.output<typeof configSettingsSchema>;
