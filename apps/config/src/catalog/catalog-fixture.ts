import type { DataSource } from 'typeorm';
import { MaxKey, MinKey } from 'bson';
import { type ChunkVersion, type ShardKey, TesseraError, type Value } from '@tessera/core';
import { VectorClockService } from '@tessera/platform';
import { type WireChunkRange, shardKeyToWire } from '@tessera/protocol';
import { ChangelogService } from '../changelog/changelog.service.js';
import type { ConfigSettings } from '../config.settings.js';
import { ConfigClockService } from '../clock/config-clock.service.js';
import { ActiveMigrationStore } from '../migration/active-migration.store.js';
import { CatalogReadService } from './catalog-read.service.js';
import { ChunkCatalogStore } from './chunk-catalog.store.js';
import { MetadataCommitService } from './metadata-commit.service.js';

/**
 * The catalog services of one config process on `dataSource`, wired by hand as Nest would,
 * for specs and the bench. Each call is a separate "process" with its own vector clock.
 */
export function catalogServices(
  dataSource: DataSource,
  nodeName = 'test',
  history: Pick<ConfigSettings, 'TESSERA_MIN_SNAPSHOT_HISTORY_WINDOW_SECS' | 'TESSERA_TRANSACTION_LIFETIME_LIMIT_SECS'> = {
    TESSERA_MIN_SNAPSHOT_HISTORY_WINDOW_SECS: 300,
    TESSERA_TRANSACTION_LIFETIME_LIMIT_SECS: 60,
  },
): { commits: MetadataCommitService; reads: CatalogReadService } {
  const clock = new ConfigClockService(dataSource, new VectorClockService());
  const changelog = new ChangelogService({ TESSERA_NODE_NAME: nodeName } as never);
  const commits = new MetadataCommitService(
    dataSource,
    clock,
    changelog,
    new ChunkCatalogStore(),
    new ActiveMigrationStore(dataSource),
    history as ConfigSettings,
  );
  return { commits, reads: new CatalogReadService(dataSource) };
}

/** `k(10)` is the one-field key `[10]`; `k('min')` / `k('max')` are MinKey / MaxKey. */
export function k(...values: Array<Value | 'min' | 'max'>): ShardKey {
  return values.map((v) => (v === 'min' ? new MinKey() : v === 'max' ? new MaxKey() : v));
}

/** The wire form of `[min, max)` of one-field keys. */
export function wireRange(min: Value | 'min', max: Value | 'max'): WireChunkRange {
  return { min: shardKeyToWire(k(min)), max: shardKeyToWire(k(max)) };
}

/** Runs `fn` and returns the `TesseraError` it throws; fails when it throws nothing or something else. */
export async function caught(fn: () => Promise<unknown>): Promise<TesseraError> {
  try {
    await fn();
  } catch (error) {
    if (error instanceof TesseraError) return error;
    throw error;
  }
  throw new Error('expected a TesseraError, but the call succeeded');
}

/** A version of the same generation with another major|minor. */
export function withMajorMinor(version: ChunkVersion, major: number, minor: number): ChunkVersion {
  return { ...version, major, minor };
}
