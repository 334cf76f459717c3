import { z } from 'zod';
import { commonSettingsShape, logicalSessionSettingsShape, millisecondsSetting } from '@tessera/platform';

/** A router's settings; docs/configuration.md documents each with its default. */
export const routerSettingsSchema = z.object({
  ...commonSettingsShape(7070),
  TESSERA_CONFIG_URL: z.url({ protocol: /^https?$/, error: 'is required: the config server URL, e.g. http://127.0.0.1:7080' }),
  /** How often the router renews its registration (MongoDB's mongos pings every 30 s). */
  TESSERA_ROUTER_PING_INTERVAL_MS: millisecondsSetting(30_000),
  ...logicalSessionSettingsShape,
});

export type RouterSettings = z.output<typeof routerSettingsSchema>;
