import { z } from 'zod';
import type { CatalogDatabase } from './catalog-messages.js';
import type { IndexSpec } from './data-messages.js';
import { databaseNameSchema, keyPatternSchema, namespaceSchema, shardNameSchema } from './messages.js';

/**
 * Requests of the config server's DDL commands (MongoDB's names and options). Shard key bounds
 * travel as canonical Extended JSON objects keyed by field, as in MongoDB (`{ x: 10 }`).
 */
const zoneNameSchema = z.string().min(1, 'must not be empty').max(64, 'must be at most 64 characters');
const keyObjectSchema = z.record(z.string(), z.unknown()).refine((o) => Object.keys(o).length > 0, 'must name at least one field');

export const enableShardingRequestSchema = z.strictObject({ db: databaseNameSchema, primaryShard: shardNameSchema.optional() });
export type EnableShardingRequest = z.input<typeof enableShardingRequestSchema>;

export const shardCollectionRequestSchema = z.strictObject({
  ns: namespaceSchema,
  key: keyPatternSchema,
  unique: z.boolean().default(false),
  numInitialChunks: z.number().int().min(1).max(1_000_000).optional(),
});
export type ShardCollectionRequest = z.input<typeof shardCollectionRequestSchema>;

export const dropCollectionRequestSchema = z.strictObject({ ns: namespaceSchema });
export const renameCollectionRequestSchema = z.strictObject({
  from: namespaceSchema,
  to: namespaceSchema,
  dropTarget: z.boolean().default(false),
});
export const dropDatabaseRequestSchema = z.strictObject({ db: databaseNameSchema });
export const movePrimaryRequestSchema = z.strictObject({ db: databaseNameSchema, to: shardNameSchema });
export const refineShardKeyRequestSchema = z.strictObject({ ns: namespaceSchema, key: keyPatternSchema });
export const removeShardRequestSchema = z.strictObject({ name: shardNameSchema });
export const shardZoneRequestSchema = z.strictObject({ shard: shardNameSchema, zone: zoneNameSchema });
export const updateZoneKeyRangeRequestSchema = z.strictObject({
  ns: namespaceSchema,
  min: keyObjectSchema,
  max: keyObjectSchema,
  /** The zone to assign, or null to remove the range. */
  zone: zoneNameSchema.nullable(),
});

export type DropCollectionRequest = z.input<typeof dropCollectionRequestSchema>;
export type RenameCollectionRequest = z.input<typeof renameCollectionRequestSchema>;
export type DropDatabaseRequest = z.input<typeof dropDatabaseRequestSchema>;
export type MovePrimaryRequest = z.input<typeof movePrimaryRequestSchema>;
export type RefineShardKeyRequest = z.input<typeof refineShardKeyRequestSchema>;
export type RemoveShardRequest = z.input<typeof removeShardRequestSchema>;
export type ShardZoneRequest = z.input<typeof shardZoneRequestSchema>;
export type UpdateZoneKeyRangeRequest = z.input<typeof updateZoneKeyRangeRequestSchema>;

/** A database as DDL answers it: the same as the catalog's routing read. */
export type DatabaseDescription = CatalogDatabase;

export interface ShardCollectionResult {
  ns: string;
  uuid: string;
  epoch: string;
  key: Record<string, 1 | 'hashed'>;
  unique: boolean;
  chunks: number;
  shards: string[];
}

export interface DropResult {
  dropped: boolean;
}

/** removeShard's answer, as MongoDB's: started, then ongoing with what remains, then completed. */
export interface RemoveShardResult {
  state: 'started' | 'ongoing' | 'completed';
  shard: string;
  /** What still holds the shard: its chunks (jumbo ones among them), databases it is primary of, migrations to or from it. */
  remaining: { chunks: number; jumboChunks: number; databases: number; migrations: number };
  /** Databases whose primary is this shard: each needs movePrimary before the shard can go. */
  dbsToMove: string[];
  /** The migrations in flight to or from the shard. */
  migrationIds: string[];
  /** What holds the shard and what moves it on, in words. */
  note: string;
}

/**
 * movePrimary's shard commands (MongoDB's `_shardsvrMovePrimaryEnterCriticalSection`,
 * `_shardsvrCloneCatalogData`, `_shardsvrMovePrimaryExitCriticalSection`): the config server's
 * coordinator sends them to the old primary (the donor) and the new one (the recipient).
 */

/** Donor: takes (or strengthens) the database's critical section, persisted, held for `reason` (the coordinator's id). */
export const enterDatabaseCriticalSectionSchema = z.strictObject({ reason: z.string().min(1).max(128), blockReads: z.boolean() });
export type EnterDatabaseCriticalSection = z.input<typeof enterDatabaseCriticalSectionSchema>;

/** Donor: releases the section held for `reason`; a section held for another reason stays. */
export const exitDatabaseCriticalSectionSchema = z.strictObject({ reason: z.string().min(1).max(128) });
export type ExitDatabaseCriticalSection = z.input<typeof exitDatabaseCriticalSectionSchema>;

/** Recipient: clones `collections` (data and indexes) from the donor at `from`; repeated calls with one `operationId` join the same clone. */
export const cloneCatalogDataSchema = z.strictObject({
  operationId: z.string().min(1).max(128),
  from: z.string().url(),
  collections: z.array(namespaceSchema).max(10_000),
});
export type CloneCatalogData = z.input<typeof cloneCatalogDataSchema>;

/** A clone's progress, per collection; `done` once every collection is complete on the recipient. */
export interface CloneCatalogDataStatus {
  state: 'cloning' | 'done';
  /** Per collection: documents and bytes cloned, sessions whose retry history came along. */
  collections: Array<{ ns: string; documents: number; bytes: number; sessions: number; done: boolean }>;
}

/** Donor: drops the collections it no longer is primary for, once the move has committed. */
export const dropStaleDataSchema = z.strictObject({ collections: z.array(namespaceSchema).max(10_000) });
export type DropStaleData = z.input<typeof dropStaleDataSchema>;

/** Donor: what the recipient needs to create an unsharded collection before its rows arrive. */
export interface CloneSource {
  uuid: string;
  keyPattern: Record<string, 1 | 'hashed'>;
  indexes: IndexSpec[];
}

/** Donor: the next rows of an unsharded collection in `_id` order, after the encoded `_id` `after` (hex). */
export const cloneRowsRequestSchema = z.strictObject({
  after: z
    .string()
    .regex(/^[0-9a-f]*$/)
    .optional(),
  limit: z.number().int().min(1).max(100_000),
});
export type CloneRowsRequest = z.input<typeof cloneRowsRequestSchema>;

/** Donor: a page of the retry history of a whole unsharded collection, sessions after `afterLsid` in lsid order. */
export const collectionSessionHistoryRequestSchema = z.strictObject({
  afterLsid: z.uuid().optional(),
  limit: z.number().int().min(1).max(10_000),
});
export type CollectionSessionHistoryRequest = z.input<typeof collectionSessionHistoryRequestSchema>;
