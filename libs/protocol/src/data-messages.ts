import { z } from 'zod';
import { chunkVersionSchema, clusterTimestampSchema } from './catalog-messages.js';
import type { ErrorEnvelope } from '@tessera/core';

/**
 * The shard's versioned data commands (internal routes under /internal/data). Documents,
 * filters, updates, sorts and projections travel as Extended JSON (relaxed). Every command
 * carries the sender's routing version for this shard: the shard version of a sharded
 * collection, or `UNSHARDED_VERSION` plus the database version of an unsharded one; a mismatch
 * answers `STALE_CONFIG` / `STALE_DB_VERSION` with both versions.
 */
const ejsonDocument = z.record(z.string(), z.unknown());

export const databaseVersionSchema = z.strictObject({ uuid: z.string().min(1), lastMod: z.number().int().min(0) });

const versioned = {
  ns: z.string().min(3),
  shardVersion: chunkVersionSchema,
  databaseVersion: databaseVersionSchema.optional(),
};

/**
 * A read's ClusterTime: `afterClusterTime` (causal consistency: see every write up to it) or
 * `atClusterTime` (a snapshot read: the data as it was then), never both. The router resolves
 * the public readConcern into this.
 */
export const shardReadConcernSchema = z
  .strictObject({ afterClusterTime: clusterTimestampSchema.optional(), atClusterTime: clusterTimestampSchema.optional() })
  .refine((c) => c.afterClusterTime === undefined || c.atClusterTime === undefined, {
    message: 'readConcern takes afterClusterTime or atClusterTime, not both',
  });
export type ShardReadConcern = z.infer<typeof shardReadConcernSchema>;

/** A logical session id as it travels between nodes: MongoDB's `lsid: { id: <UUID> }`. */
export const lsidSchema = z.strictObject({ id: z.uuid() });
export type Lsid = z.infer<typeof lsidSchema>;

/**
 * A data command inside a transaction: the transaction, its read timestamp (the router's
 * ClusterTime at the first statement: every participant reads at it) and `startTransaction` on
 * the first command this participant receives. See transaction-messages.ts.
 */
export const transactionFieldsSchema = z.strictObject({
  lsid: lsidSchema,
  txnNumber: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
  atClusterTime: clusterTimestampSchema,
  startTransaction: z.boolean().optional(),
});
export type TransactionFields = z.infer<typeof transactionFieldsSchema>;
const inTransaction = { transaction: transactionFieldsSchema.optional() };

/**
 * A read's `maxTimeMS`, the time left of the router's limit when it sent the command (0: none),
 * and its `collation` (MongoDB's document, checked by `parseCollation`; none is byte order).
 */
const readOptions = {
  maxTimeMS: z
    .number()
    .int()
    .min(0)
    .max(2 ** 31 - 1)
    .optional(),
  collation: ejsonDocument.optional(),
};

/**
 * A single-document write without the shard key (MongoDB 7.0's write without shard key) runs in
 * phases, the router sending one statement per command: `probe` asks every shard whether a
 * retryable write's statement already ran there (answered from history, nothing runs otherwise),
 * then the router reads one matching document's `_id` and shard key, and `write` runs the
 * statement on the shard owning it with the filter narrowed to that document. A `write` that
 * matched nothing is not recorded in the session's history: the document changed meanwhile and
 * the router picks another under the same stmtId.
 */
export const withoutShardKeyPhaseSchema = z.enum(['probe', 'write']);
export type WithoutShardKeyPhase = z.output<typeof withoutShardKeyPhaseSchema>;
const withoutShardKey = { withoutShardKey: withoutShardKeyPhaseSchema.optional() };
const oneStatementPerPhase = (statements: readonly unknown[], phase: WithoutShardKeyPhase | undefined) =>
  phase === undefined || statements.length === 1;
const oneStatementMessage = { message: 'a write without shard key sends one statement per command' };

/**
 * What makes a write command retryable (sharding-internals.md, "Retryable writes"): its session,
 * the session's `txnNumber`, and the `stmtId` of each statement, which the router assigns (the
 * statement's index in the user's command) so that a retry, however it is split, names the same
 * statements. All three or none; `stmtIds` has one entry per statement.
 */
const retryable = {
  lsid: lsidSchema.optional(),
  txnNumber: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
  stmtIds: z
    .array(
      z
        .number()
        .int()
        .min(0)
        .max(2 ** 31 - 1),
    )
    .optional(),
};

/**
 * One session's part of an insert that carries several sessions' documents (the router's
 * coalesced retryable inserts): the part owns as many of the command's documents, in order, as
 * it has stmtIds.
 */
const sessionPartSchema = z.strictObject({
  lsid: lsidSchema,
  txnNumber: retryable.txnNumber.unwrap(),
  stmtIds: retryable.stmtIds.unwrap(),
});
export type SessionPart = z.infer<typeof sessionPartSchema>;

export const insertCommandSchema = z.strictObject({
  ...versioned,
  ...inTransaction,
  ...retryable,
  /** Instead of `lsid`, `txnNumber` and `stmtIds`: the command's documents by session. */
  sessionParts: z.array(sessionPartSchema).min(1).optional(),
  documents: z.array(z.unknown()).min(1).max(100_000),
  ordered: z.boolean().default(true),
});
export type InsertCommand = z.input<typeof insertCommandSchema>;

export const findCommandSchema = z.strictObject({
  ...versioned,
  ...inTransaction,
  ...readOptions,
  readConcern: shardReadConcernSchema.optional(),
  filter: ejsonDocument.default({}),
  sort: ejsonDocument.optional(),
  projection: ejsonDocument.optional(),
  let: ejsonDocument.optional(),
  skip: z.number().int().min(0).optional(),
  limit: z.number().int().min(0).optional(),
  batchSize: z.number().int().min(0).optional(),
});
export type FindCommand = z.input<typeof findCommandSchema>;

/**
 * A shard's part of an aggregation: the documents it owns that match `filter` (the pipeline's
 * leading `$match`), run through `pipeline` (the shards part the router split off), answered as
 * a cursor like find's.
 */
export const aggregateCommandSchema = z.strictObject({
  ...versioned,
  ...inTransaction,
  ...readOptions,
  readConcern: shardReadConcernSchema.optional(),
  filter: ejsonDocument.default({}),
  pipeline: z.array(ejsonDocument).max(1_000),
  let: ejsonDocument.optional(),
  batchSize: z.number().int().min(0).optional(),
});
export type AggregateCommand = z.input<typeof aggregateCommandSchema>;

export const getMoreCommandSchema = z.strictObject({ cursorId: z.string().regex(/^\d+$/), batchSize: z.number().int().min(0).optional() });
export type GetMoreCommand = z.input<typeof getMoreCommandSchema>;

export const killCursorsCommandSchema = z.strictObject({ cursorIds: z.array(z.string()).max(10_000) });

export const updateStatementSchema = z.strictObject({
  q: ejsonDocument,
  u: z.union([ejsonDocument, z.array(z.unknown())]),
  multi: z.boolean().default(false),
  upsert: z.boolean().default(false),
  arrayFilters: z.array(ejsonDocument).optional(),
  collation: ejsonDocument.optional(),
  /** Constants a pipeline update reads as `$$name`, over the command's `let`. */
  c: ejsonDocument.optional(),
  /** With `upsert`: when nothing matches, insert `c.new` as it is (`$merge` with a pipeline `whenMatched`). */
  upsertSupplied: z.boolean().optional(),
});
export const updateCommandSchema = z
  .strictObject({
    ...versioned,
    ...inTransaction,
    ...retryable,
    ...withoutShardKey,
    updates: z.array(updateStatementSchema).min(1).max(100_000),
    ordered: z.boolean().default(true),
    let: ejsonDocument.optional(),
  })
  .refine((c) => oneStatementPerPhase(c.updates, c.withoutShardKey), oneStatementMessage);
export type UpdateCommand = z.input<typeof updateCommandSchema>;

export const deleteStatementSchema = z.strictObject({
  q: ejsonDocument,
  limit: z.union([z.literal(0), z.literal(1)]),
  collation: ejsonDocument.optional(),
});
export const deleteCommandSchema = z
  .strictObject({
    ...versioned,
    ...inTransaction,
    ...retryable,
    ...withoutShardKey,
    deletes: z.array(deleteStatementSchema).min(1).max(100_000),
    ordered: z.boolean().default(true),
    let: ejsonDocument.optional(),
  })
  .refine((c) => oneStatementPerPhase(c.deletes, c.withoutShardKey), oneStatementMessage);
export type DeleteCommand = z.input<typeof deleteCommandSchema>;

export const findAndModifyCommandSchema = z.strictObject({
  ...versioned,
  ...inTransaction,
  ...retryable,
  ...withoutShardKey,
  query: ejsonDocument.default({}),
  sort: ejsonDocument.optional(),
  update: z.union([ejsonDocument, z.array(z.unknown())]).optional(),
  arrayFilters: z.array(ejsonDocument).optional(),
  remove: z.boolean().default(false),
  new: z.boolean().default(false),
  upsert: z.boolean().default(false),
  fields: ejsonDocument.optional(),
  collation: ejsonDocument.optional(),
  let: ejsonDocument.optional(),
});
export type FindAndModifyCommand = z.input<typeof findAndModifyCommandSchema>;

export const countCommandSchema = z.strictObject({
  ...versioned,
  ...inTransaction,
  ...readOptions,
  readConcern: shardReadConcernSchema.optional(),
  filter: ejsonDocument.default({}),
  skip: z.number().int().min(0).optional(),
  limit: z.number().int().min(0).optional(),
});
export type CountCommand = z.input<typeof countCommandSchema>;

export const distinctCommandSchema = z.strictObject({
  ...versioned,
  ...inTransaction,
  ...readOptions,
  readConcern: shardReadConcernSchema.optional(),
  key: z.string().min(1),
  filter: ejsonDocument.default({}),
});
export type DistinctCommand = z.input<typeof distinctCommandSchema>;

/** A statement of a batch that failed, by its index in the request the shard received. */
export interface WriteErrorEntry {
  index: number;
  error: ErrorEnvelope;
}

/** In a retryable write's answer: the statements answered from the session's history, not run again. */
interface Retried {
  retriedStmtIds?: number[];
}

export interface InsertCommandResult extends Retried {
  /** For a command with `sessionParts`: per part, the stmtIds answered from its session's history. */
  retriedByPart?: number[][];
  insertedCount: number;
  /** The indexes of the documents inserted, ascending (their `_id`s are in the request); retried ones included. */
  inserted: number[];
  writeErrors: WriteErrorEntry[];
}

export interface CursorBatch {
  /** Null when the query is exhausted. */
  cursorId: string | null;
  documents: unknown[];
}

export interface UpdateCommandResult extends Retried {
  matchedCount: number;
  modifiedCount: number;
  upserted: Array<{ index: number; _id: unknown }>;
  writeErrors: WriteErrorEntry[];
}

export interface DeleteCommandResult extends Retried {
  deletedCount: number;
  writeErrors: WriteErrorEntry[];
}

export interface FindAndModifyResult extends Retried {
  value: unknown;
  lastErrorObject: { n: number; updatedExisting: boolean; upserted?: unknown };
}

/** One index to create: key pattern (1 or "hashed" per field), optional name (MongoDB's default) and `unique`. */
export const indexSpecSchema = z.strictObject({
  key: z.record(z.string(), z.union([z.literal(1), z.literal('hashed')])),
  name: z.string().min(1).max(128).optional(),
  unique: z.boolean().optional(),
});
export type IndexSpec = z.infer<typeof indexSpecSchema>;

export const createIndexesCommandSchema = z.strictObject({ ...versioned, indexes: z.array(indexSpecSchema).min(1).max(64) });
export type CreateIndexesCommand = z.input<typeof createIndexesCommandSchema>;

export const listIndexesCommandSchema = z.strictObject({ ...versioned });
export type ListIndexesCommand = z.input<typeof listIndexesCommandSchema>;

export const dropIndexesCommandSchema = z.strictObject({ ...versioned, name: z.string().min(1) });
export type DropIndexesCommand = z.input<typeof dropIndexesCommandSchema>;

/** An index as listIndexes shows it (MongoDB's shape). */
export interface ListedIndex {
  v: 2;
  key: Record<string, 1 | 'hashed'>;
  name: string;
  unique?: true;
}

export interface CreateIndexesResult {
  numIndexesBefore: number;
  numIndexesAfter: number;
  /** True when this command created the (unsharded) collection on the shard. */
  createdCollectionAutomatically: boolean;
}

/** `nIndexesWas` is 0 when the shard has no table for the collection (nothing to drop there). */
export interface DropIndexesResult {
  nIndexesWas: number;
}
