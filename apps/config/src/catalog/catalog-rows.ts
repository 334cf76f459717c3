import {
  type Chunk,
  type ChunkHistoryEntry,
  type ChunkVersion,
  type ClusterTimestamp,
  type CollectionGeneration,
  type DatabaseVersion,
  type ShardKey,
  type ShardKeyPattern,
  decodeKey,
  encodeKey,
  makeChunkVersion,
  parseShardKeyPattern,
  shardKeyToObject,
  toExtendedJson,
} from '@tessera/core';

/**
 * Rows of the catalog tables as `pg` returns them (bigint as string, bytea as Buffer) and the
 * mappers to and from libs/core's types. Every service that reads or writes the catalog goes
 * through these, so a chunk always reads back as the chunk that was written.
 */
export interface DatabaseRow {
  name: string;
  primary_shard: string;
  version_uuid: string;
  version_last_mod: number;
  created_at: Date;
}

export interface CollectionRow {
  ns: string;
  db: string;
  uuid: string;
  epoch: string;
  timestamp_t: string;
  timestamp_i: string;
  key_pattern: Record<string, 1 | 'hashed'>;
  is_unique: boolean;
  max_chunk_size_bytes: string | null;
  balancing_enabled: boolean;
  auto_merging_enabled: boolean;
  defragment_collection: boolean;
  /** The defragmentation machine's state (libs/core `DefragmentationState`) while `defragment_collection`. */
  defragmentation_state: unknown;
  allow_migrations: boolean;
  created_at: Date;
  updated_at: Date;
}

export interface ChunkRow {
  id: string;
  collection_uuid: string;
  min: Buffer;
  max: Buffer;
  min_ejson: string;
  max_ejson: string;
  shard: string;
  major: number;
  minor: number;
  history: Array<{ validAfter: ClusterTimestamp; shard: string }>;
  jumbo: boolean;
  estimated_size_bytes: string | null;
  estimated_documents: string | null;
}

export function timestampOf(t: string | number, i: string | number): ClusterTimestamp {
  return { t: Number(t), i: Number(i) };
}

export function generationOfRow(row: CollectionRow): CollectionGeneration {
  return { epoch: row.epoch, timestamp: timestampOf(row.timestamp_t, row.timestamp_i) };
}

export function keyPatternOfRow(row: CollectionRow): ShardKeyPattern {
  return parseShardKeyPattern(row.key_pattern);
}

export function databaseVersionOfRow(row: DatabaseRow): DatabaseVersion {
  return { uuid: row.version_uuid, lastMod: row.version_last_mod };
}

/** The collection version recorded in chunk rows: the highest (major, minor). */
export function versionOfRow(row: Pick<ChunkRow, 'major' | 'minor'>, generation: CollectionGeneration): ChunkVersion {
  return makeChunkVersion(generation, row.major, row.minor);
}

export function chunkFromRow(row: ChunkRow, generation: CollectionGeneration): Chunk {
  return {
    range: { min: decodeKey(row.min), max: decodeKey(row.max) },
    shard: row.shard,
    version: versionOfRow(row, generation),
    history: row.history.map((h): ChunkHistoryEntry => ({ validAfter: h.validAfter, shard: h.shard })),
    ...(row.jumbo ? { jumbo: true } : {}),
  };
}

/** The column values of a chunk, in the order of `CHUNK_COLUMNS`. */
export function chunkRowValues(collectionUuid: string, pattern: ShardKeyPattern, chunk: Chunk): unknown[] {
  return [
    collectionUuid,
    Buffer.from(encodeKey(chunk.range.min)),
    Buffer.from(encodeKey(chunk.range.max)),
    readableKey(pattern, chunk.range.min),
    readableKey(pattern, chunk.range.max),
    chunk.shard,
    chunk.version.major,
    chunk.version.minor,
    JSON.stringify(chunk.history),
    chunk.jumbo ?? false,
  ];
}

export const CHUNK_COLUMNS = 'collection_uuid, min, max, min_ejson, max_ejson, shard, major, minor, history, jumbo';

/** A shard key as canonical Extended JSON of `{ field: value }`, for people and logs. */
export function readableKey(pattern: ShardKeyPattern, key: ShardKey): string {
  return toExtendedJson(shardKeyToObject(pattern, key));
}

/** Rows per INSERT: 10 parameters a row stays far below Postgres's 65,535 parameters. */
const INSERT_BATCH = 1000;

/** Inserts chunks of one collection in batches, inside the caller's transaction. */
export async function insertChunkRows(
  manager: { query(sql: string, parameters?: unknown[]): Promise<unknown> },
  collectionUuid: string,
  pattern: ShardKeyPattern,
  chunks: readonly Chunk[],
): Promise<void> {
  for (let start = 0; start < chunks.length; start += INSERT_BATCH) {
    const batch = chunks.slice(start, start + INSERT_BATCH);
    const values = batch.flatMap((chunk) => chunkRowValues(collectionUuid, pattern, chunk));
    const width = values.length / batch.length;
    const tuples = batch.map((_, row) => `(${Array.from({ length: width }, (__, col) => `$${row * width + col + 1}`).join(', ')})`);
    await manager.query(`INSERT INTO chunks (${CHUNK_COLUMNS}) VALUES ${tuples.join(', ')}`, values);
  }
}
