import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import {
  type Chunk,
  type ClusterTimestamp,
  type CollectionGeneration,
  type ShardKey,
  type ShardKeyPattern,
  createInitialChunks,
  globalMaxKey,
  globalMinKey,
  parseShardKeyPattern,
} from '@tessera/core';
import { insertChunkRows } from './catalog-rows.js';

/** What `seedShardedCollection` writes. */
export interface SeedCollectionSpec {
  ns: string;
  /** Registered (if missing) and given chunks round-robin, in order. */
  shards: string[];
  /** Split points of the initial chunks (none: one chunk). */
  splitPoints?: ShardKey[];
  keyPattern?: Record<string, 1 | 'hashed'>;
  epoch?: string;
  timestamp?: ClusterTimestamp;
}

/** A seeded collection: its identity and the chunks written. */
export interface SeededCollection {
  ns: string;
  uuid: string;
  generation: CollectionGeneration;
  pattern: ShardKeyPattern;
  chunks: Chunk[];
}

/**
 * Writes a sharded collection straight into the catalog tables (shards, database, collection,
 * chunks 1|0, 1|1, ... round-robin), for tests and benchmarks of the catalog services. Not the
 * shardCollection DDL: no shard is told anything.
 */
export async function seedShardedCollection(dataSource: DataSource, spec: SeedCollectionSpec): Promise<SeededCollection> {
  const keyPattern = spec.keyPattern ?? { x: 1 };
  const pattern = parseShardKeyPattern(keyPattern);
  const generation: CollectionGeneration = { epoch: spec.epoch ?? randomEpoch(), timestamp: spec.timestamp ?? { t: 1_700_000_000, i: 1 } };
  const db = spec.ns.slice(0, spec.ns.indexOf('.'));
  const uuid = randomUUID();
  const chunks = createInitialChunks({
    generation,
    keySpace: { min: globalMinKey(pattern), max: globalMaxKey(pattern) },
    ...(spec.splitPoints ? { splitPoints: spec.splitPoints } : {}),
    shards: spec.shards,
    at: generation.timestamp,
  });
  await dataSource.transaction(async (manager) => {
    for (const [i, shard] of spec.shards.entries()) {
      await manager.query('INSERT INTO shards (name, url) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING', [
        shard,
        `http://127.0.0.1:${20000 + i}/${shard}`,
      ]);
    }
    await manager.query(
      'INSERT INTO databases (name, primary_shard, version_uuid, version_last_mod) VALUES ($1, $2, $3, 1) ON CONFLICT (name) DO NOTHING',
      [db, spec.shards[0], randomUUID()],
    );
    await manager.query(
      'INSERT INTO collections (ns, db, uuid, epoch, timestamp_t, timestamp_i, key_pattern) VALUES ($1, $2, $3, $4, $5, $6, $7)',
      [spec.ns, db, uuid, generation.epoch, generation.timestamp.t, generation.timestamp.i, JSON.stringify(keyPattern)],
    );
    await insertChunkRows(manager, uuid, pattern, chunks);
  });
  return { ns: spec.ns, uuid, generation, pattern, chunks };
}

function randomEpoch(): string {
  return randomUUID().replaceAll('-', '').slice(0, 24);
}
