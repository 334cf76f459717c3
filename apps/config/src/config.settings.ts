import { z } from 'zod';
import { commonSettingsShape, databaseSettingsShape, millisecondsSetting } from '@tessera/platform';

/** The config server's settings; README.md documents each with its default. */
export const configSettingsSchema = z.object({
  ...commonSettingsShape(7080),
  ...databaseSettingsShape,
  /** How often the config server checks that each shard answers. */
  TESSERA_SHARD_MONITOR_INTERVAL_MS: millisecondsSetting(5_000),
  /** How often this process renews its config.lockpings row. */
  TESSERA_LOCK_PING_INTERVAL_MS: millisecondsSetting(5_000),
  /** A lock whose process has not pinged for this long may be taken over. */
  TESSERA_LOCK_TAKEOVER_MS: millisecondsSetting(30_000),
  /** How long a DDL waits for a busy lock before answering LOCK_BUSY. */
  TESSERA_LOCK_WAIT_MS: millisecondsSetting(20_000),
  /** The leader lease: a leader that has not renewed for this long is replaced. */
  TESSERA_LEADER_LEASE_MS: millisecondsSetting(10_000),
  /** How often the leader renews its lease and followers try to take an expired one. */
  TESSERA_LEADER_RENEW_INTERVAL_MS: millisecondsSetting(1_000),
});

export type ConfigSettings = z.output<typeof configSettingsSchema>;
