import { z } from 'zod';
import {
  type Chunk,
  type ChunkRange,
  type ChunkVersion,
  type ClusterTimestamp,
  type ShardKey,
  TesseraError,
  fromExtendedJsonObject,
  toExtendedJsonObject,
} from '@tessera/core';
import { shardNameSchema } from './messages.js';

/**
 * Wire contracts of the config server's catalog: routing reads (databases, collections,
 * chunks) and metadata commits (split, merge, migration, jumbo flags, size estimates).
 *
 * A shard key travels as an array with one Extended JSON value per shard key field, in the
 * pattern's order (`[{ "$minKey": 1 }]`, `[10, "abc"]`), made by libs/core's
 * `toExtendedJsonObject` and read back by `fromExtendedJsonObject`; equal keys encode to equal
 * bytes on both sides. Versions and cluster times are plain JSON (`{ epoch, timestamp: {t, i},
 * major, minor }`).
 */

/** A namespace to look up; anything unknown answers NAMESPACE_NOT_FOUND, so the check is loose. */
const catalogNamespaceSchema = z
  .string()
  .min(3)
  .max(255)
  .regex(/^[^.]+\.[^\0]+$/, 'must be "database.collection"');
const uint32 = z.number().int().min(0).max(0xffffffff);

export const clusterTimestampSchema = z.strictObject({ t: uint32, i: uint32 });
export const collectionGenerationSchema = z.strictObject({
  epoch: z.string().regex(/^[0-9a-f]{24}$/, 'must be an ObjectId as 24 lowercase hex digits'),
  timestamp: clusterTimestampSchema,
});
export const chunkVersionSchema = collectionGenerationSchema.extend({
  major: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
  minor: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
});

/** A shard key on the wire: one Extended JSON value per field. */
export const wireShardKeySchema = z.array(z.unknown()).min(1, 'must have at least one field').max(32);
export type WireShardKey = unknown[];
export const wireChunkRangeSchema = z.strictObject({ min: wireShardKeySchema, max: wireShardKeySchema });
export interface WireChunkRange {
  min: WireShardKey;
  max: WireShardKey;
}

/** A chunk on the wire. */
export interface WireChunk {
  range: WireChunkRange;
  shard: string;
  version: ChunkVersion;
  /** Placements, newest first. */
  history: Array<{ validAfter: ClusterTimestamp; shard: string }>;
  jumbo?: boolean;
}

export const wireChunkSchema = z.strictObject({
  range: wireChunkRangeSchema,
  shard: shardNameSchema,
  version: chunkVersionSchema,
  history: z.array(z.strictObject({ validAfter: clusterTimestampSchema, shard: shardNameSchema })),
  jumbo: z.boolean().optional(),
});

/** Returns the wire form of a shard key. Throws nothing for supported values. */
export function shardKeyToWire(key: ShardKey): WireShardKey {
  return key.map((value) => toExtendedJsonObject(value));
}

/** Reads a shard key from its wire form. Throws `FAILED_TO_PARSE` (naming `where`) on malformed Extended JSON. */
export function shardKeyFromWire(wire: readonly unknown[], where = 'key'): ShardKey {
  return wire.map((value, i) => {
    try {
      return fromExtendedJsonObject(value);
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      throw new TesseraError('FAILED_TO_PARSE', `${where}[${i}] is not a valid Extended JSON value: ${reason}`, {
        details: { field: `${where}[${i}]` },
      });
    }
  });
}

/** Returns the wire form of a range. Throws nothing for supported values. */
export function chunkRangeToWire(range: ChunkRange): WireChunkRange {
  return { min: shardKeyToWire(range.min), max: shardKeyToWire(range.max) };
}

/** Reads a range from its wire form. Throws `FAILED_TO_PARSE` as `shardKeyFromWire`. */
export function chunkRangeFromWire(wire: WireChunkRange, where = 'range'): ChunkRange {
  return { min: shardKeyFromWire(wire.min, `${where}.min`), max: shardKeyFromWire(wire.max, `${where}.max`) };
}

/** Returns the wire form of a chunk. Throws nothing for supported values. */
export function chunkToWire(chunk: Chunk): WireChunk {
  return {
    range: chunkRangeToWire(chunk.range),
    shard: chunk.shard,
    version: chunk.version,
    history: chunk.history.map((h) => ({ validAfter: h.validAfter, shard: h.shard })),
    ...(chunk.jumbo ? { jumbo: true } : {}),
  };
}

/** Reads a chunk from its wire form. Throws `FAILED_TO_PARSE` on a malformed key. */
export function chunkFromWire(wire: WireChunk): Chunk {
  return {
    range: chunkRangeFromWire(wire.range),
    shard: wire.shard,
    version: wire.version,
    history: wire.history,
    ...(wire.jumbo ? { jumbo: true } : {}),
  };
}

// ---- Routing reads ----

/** A database as the catalog holds it (MongoDB's config.databases entry). */
export interface CatalogDatabase {
  name: string;
  primaryShard: string;
  version: { uuid: string; lastMod: number };
}

/** A sharded collection as the catalog holds it (config.collections), with its current version. */
export interface CatalogCollection {
  ns: string;
  uuid: string;
  epoch: string;
  timestamp: ClusterTimestamp;
  keyPattern: Record<string, 1 | 'hashed'>;
  unique: boolean;
  maxChunkSizeBytes: number | null;
  balancingEnabled: boolean;
  autoMergingEnabled: boolean;
  allowMigrations: boolean;
  collectionVersion: ChunkVersion;
}

export const getChunksRequestSchema = z.strictObject({
  ns: catalogNamespaceSchema,
  /** The caller's cached collection version; absent (or another generation) asks for every chunk. */
  sinceVersion: chunkVersionSchema.optional(),
});
export type GetChunksRequest = z.input<typeof getChunksRequestSchema>;

/**
 * Chunks of a collection. `full: true`: every chunk, in key order (rebuild the routing table).
 * `full: false`: only chunks whose version is above `sinceVersion` (apply them to the cached
 * table); empty when nothing changed. Always the current collection version and generation.
 */
export interface GetChunksResult {
  ns: string;
  uuid: string;
  epoch: string;
  timestamp: ClusterTimestamp;
  keyPattern: Record<string, 1 | 'hashed'>;
  collectionVersion: ChunkVersion;
  full: boolean;
  chunks: WireChunk[];
}

// ---- Metadata commits ----

/**
 * Why a split or merge was asked for, kept in its changelog row: a shard's auto-split
 * (`autoSplit`, or `topChunk` when it split at the edge key), the balancer's splits at zone
 * bounds (`zoneBoundary`) and of chunks refused as too big (`chunkTooBig`), its merges
 * (`defragmentation`, `autoMerge`), and a user's command (`manual`).
 */
export const placementReasonSchema = z.enum([
  'autoSplit',
  'topChunk',
  'zoneBoundary',
  'chunkTooBig',
  'defragmentation',
  'autoMerge',
  'manual',
]);
export type PlacementReason = z.infer<typeof placementReasonSchema>;

const commitBase = {
  ns: catalogNamespaceSchema,
  /** The collection version the caller based its request on; the commit is a compare-and-set on it. */
  expectedCollectionVersion: chunkVersionSchema,
};

export const commitSplitRequestSchema = z.strictObject({
  ns: catalogNamespaceSchema,
  /**
   * A collection version (compare-and-set), or only the collection's generation: a shard's
   * auto-splitter checks that the chunk is exactly the range it measured, whatever happened to
   * other chunks meanwhile.
   */
  expectedCollectionVersion: z.union([chunkVersionSchema, collectionGenerationSchema]),
  /** The shard that owns the chunk. */
  shard: shardNameSchema,
  /** Exactly one existing chunk. */
  range: wireChunkRangeSchema,
  /** Strictly increasing, strictly inside the range; n points make n + 1 chunks. */
  splitPoints: z.array(wireShardKeySchema).min(1, 'must hold at least one split point').max(8192),
  reason: placementReasonSchema.optional(),
});
export type CommitSplitRequest = z.input<typeof commitSplitRequestSchema>;

export const commitMergeRequestSchema = z.strictObject({
  ...commitBase,
  /** The shard that owns every chunk of the range. */
  shard: shardNameSchema,
  /** Exactly covered by two or more contiguous chunks. */
  range: wireChunkRangeSchema,
  reason: placementReasonSchema.optional(),
});
export type CommitMergeRequest = z.input<typeof commitMergeRequestSchema>;

export const commitMigrationRequestSchema = z.strictObject({
  ns: catalogNamespaceSchema,
  /**
   * A collection version (compare-and-set, as other commits), or only the collection's
   * generation: a donor checks that the chunk is exactly the range it owns, whatever happened to
   * other chunks meanwhile.
   */
  expectedCollectionVersion: z.union([chunkVersionSchema, collectionGenerationSchema]),
  /** Exactly one chunk, owned by `donor`. */
  range: wireChunkRangeSchema,
  donor: shardNameSchema,
  recipient: shardNameSchema,
  /** The migration committing: its decision is recorded with the commit, and a retry of a commit that landed is a no-op. */
  migrationId: z.uuid().optional(),
});
export type CommitMigrationRequest = z.input<typeof commitMigrationRequestSchema>;

export const clearJumboRequestSchema = z.strictObject({ ...commitBase, range: wireChunkRangeSchema });
export type ClearJumboRequest = z.input<typeof clearJumboRequestSchema>;

/** Marks a chunk that could not be split as jumbo; only the generation is checked (no version bump). */
export const markJumboRequestSchema = z.strictObject({
  ns: catalogNamespaceSchema,
  generation: collectionGenerationSchema,
  range: wireChunkRangeSchema,
});
export type MarkJumboRequest = z.input<typeof markJumboRequestSchema>;

/**
 * Records a shard's estimate of a chunk's data size, and of its documents when the shard counted
 * them in the same measurement; only the generation is checked.
 */
export const recordChunkSizeEstimateRequestSchema = z.strictObject({
  ns: catalogNamespaceSchema,
  generation: collectionGenerationSchema,
  range: wireChunkRangeSchema,
  estimatedSizeBytes: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
  estimatedDocuments: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
});
export type RecordChunkSizeEstimateRequest = z.input<typeof recordChunkSizeEstimateRequestSchema>;

/** The outcome of a metadata commit: the chunks it wrote and the collection version after it. */
export interface CommitResult {
  ns: string;
  /** The changed or new chunks, in key order (empty when the commit changed nothing). */
  chunks: WireChunk[];
  collectionVersion: ChunkVersion;
  /** The ConfigTime of the commit (the current ConfigTime when nothing changed). */
  configTime: ClusterTimestamp;
}
