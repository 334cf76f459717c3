import { z } from 'zod';
import { commonSettingsShape, databaseSettingsShape } from '@tessera/platform';

/** A shard's settings; README.md documents each with its default. */
export const shardSettingsSchema = z.object({
  ...commonSettingsShape(7101),
  ...databaseSettingsShape,
});

export type ShardSettings = z.output<typeof shardSettingsSchema>;
