/**
 * The public request bodies, as zod schemas over their JSON (Extended JSON values are plain
 * JSON objects at this point, e.g. `{"$oid": "..."}`). They validate the edge and generate
 * the OpenAPI request schemas, so the two cannot drift apart.
 */
import { z } from 'zod';
import { readConcernBodySchema } from '../reads/read-concern.js';
import { transactionBodyFields } from '../transactions/transaction-fields.js';
import { lsidBodySchema, txnNumberBodySchema } from './session-fields.js';

/**
 * A document, filter, update, sort or projection: a JSON object (Extended JSON), checked for
 * being one and passed on as it came. (`z.record` would copy every field of every document on
 * the insert path.) Its fields are the query language's to check; `meta` gives the OpenAPI
 * document its JSON Schema.
 */
export const documentSchema = z
  .custom<Record<string, unknown>>((value) => value !== null && typeof value === 'object' && !Array.isArray(value), {
    message: 'expected a document (a JSON object)',
  })
  .meta({ type: 'object', additionalProperties: {}, description: 'A document in Extended JSON (relaxed or canonical).' });
const count = z.number().int().min(0);
/**
 * A read's session (its `lastUse` is what a session keeps alive), and its readConcern; in a
 * transaction, its txnNumber and the transaction's fields.
 */
const readSession = {
  lsid: lsidBodySchema.optional(),
  txnNumber: txnNumberBodySchema.optional(),
  readConcern: readConcernBodySchema.optional(),
  ...transactionBodyFields,
};
/** A write's session, and its txnNumber when the write is retryable or in a transaction. */
const writeSession = { lsid: lsidBodySchema.optional(), txnNumber: txnNumberBodySchema.optional(), ...transactionBodyFields };
/** Any value, kept with the operation: in `currentOp` and the slow-operation log. */
const comment = z
  .unknown()
  .optional()
  .meta({ description: 'Any value, as drivers send it: shown by currentOp and in the slow-operation log.' });
/** An index to use, by name or key pattern; refused (BadValue) when the collection has no such index. */
const hint = z
  .union([z.string().min(1), documentSchema])
  .optional()
  .meta({
    description:
      'An index by name (`"a_1"`) or key pattern (`{ "a": 1 }`), or `{ "$natural": 1 }`: refused (BadValue) when the collection has no such index. Checked; the shard plans its scan as without it.',
  });
/** How strings compare (MongoDB's collation document); checked by `parseCollation`. */
const collation = documentSchema.optional().meta({
  description:
    'MongoDB\'s collation: `{ locale, strength (1-5), caseLevel, caseFirst, numericOrdering, alternate, normalization }`, or `{ locale: "simple" }` (byte order, the default). Applies to the filter, the sort and distinct; `backwards` and `maxVariable` are refused.',
});
/** How a write statement's filter (and a `$` path's match) compares strings. */
const writeCollation = documentSchema.optional().meta({
  description:
    "MongoDB's collation for the statement's filter (and the element a `$` path names), as for find. A statement with a collation is routed by its shard key only when the key's values hold no string; otherwise it reaches every shard (a single-document one runs as a write without shard key).",
});
/** Variables a write's `$expr` filters and pipeline updates read. */
const writeLet = documentSchema
  .optional()
  .meta({ description: "Variables that every statement's `$expr` filter and update pipeline read as `$$name`." });
/** A read's time limit. */
const maxTimeMS = count
  .max(2 ** 31 - 1)
  .optional()
  .meta({
    description:
      'Stop the operation, on the router and every shard it reached, after this many milliseconds (MaxTimeMSExpired, 50); 0 means no limit.',
  });
/** MongoDB's maxWriteBatchSize. */
const MAX_WRITE_BATCH = 100_000;

export const insertBodySchema = z.strictObject({
  documents: z
    .array(documentSchema)
    .min(1)
    .max(MAX_WRITE_BATCH)
    .meta({ description: 'Documents to insert; `_id` is generated (an ObjectId) when missing.' }),
  ordered: z.boolean().default(true).meta({ description: 'Stop at the first error (true) or go on with the others (false).' }),
  comment,
  ...writeSession,
});

export const findBodySchema = z.strictObject({
  ...readSession,
  filter: documentSchema.default({}),
  sort: documentSchema.optional(),
  projection: documentSchema.optional().meta({
    description:
      'Fields to return: 1 or 0 per field, `{ "arr": { "$slice": n } }` or `[skip, n]`, `{ "arr": { "$elemMatch": query } }`, `{ "arr.$": 1 }` (the element the filter matched) and computed fields (an aggregation expression, reading `let`).',
  }),
  limit: count.optional().meta({ description: 'At most this many documents in all; 0 means no limit.' }),
  skip: count.optional(),
  batchSize: count.optional().meta({
    description: 'Documents in the first batch (default 101); a batch also ends before 16 MiB of documents, holding one at least.',
  }),
  let: documentSchema.optional().meta({ description: "Variables the filter's `$expr` reads as `$$name`." }),
  hint,
  comment,
  maxTimeMS,
  collation,
});

export const nextBodySchema = z.strictObject({
  lsid: lsidBodySchema.optional(),
  batchSize: count
    .optional()
    .meta({ description: 'Documents in this batch (default 101); a batch also ends before 16 MiB of documents, holding one at least.' }),
});

const arrayFiltersSchema = z
  .array(documentSchema)
  .optional()
  .meta({ description: 'Filters for the `$[<identifier>]` paths of the update, one per identifier: `[{ "x.score": { "$gte": 90 } }]`.' });

export const updateStatementBodySchema = z.strictObject({
  q: documentSchema,
  u: z.union([documentSchema, z.array(documentSchema)]).meta({
    description:
      'An update document (`$set`, ...), a replacement document, or an update pipeline: stages `$set`/`$addFields`, `$unset`, `$project`, `$replaceRoot`/`$replaceWith` with aggregation expressions.',
  }),
  multi: z.boolean().default(false),
  upsert: z.boolean().default(false),
  arrayFilters: arrayFiltersSchema,
  hint,
  collation: writeCollation,
  c: documentSchema.optional().meta({
    description: "Constants an update pipeline reads as `$$name`, over the command's `let` (MongoDB 5.0's `c`); only with a pipeline.",
  }),
});
export const updateBodySchema = z.strictObject({
  updates: z.array(updateStatementBodySchema).min(1).max(MAX_WRITE_BATCH),
  ordered: z.boolean().default(true),
  let: writeLet,
  comment,
  ...writeSession,
});

export const deleteStatementBodySchema = z.strictObject({
  q: documentSchema,
  limit: z.union([z.literal(0), z.literal(1)]).meta({ description: '1 deletes one matching document, 0 all of them.' }),
  hint,
  collation: writeCollation,
});
export const deleteBodySchema = z.strictObject({
  deletes: z.array(deleteStatementBodySchema).min(1).max(MAX_WRITE_BATCH),
  ordered: z.boolean().default(true),
  let: writeLet,
  comment,
  ...writeSession,
});

/** MongoDB 8.0's bulkWrite: operations on several namespaces, each naming its namespace by index in `nsInfo`. */
const nsIndex = count.meta({ description: 'The index of the namespace in nsInfo.' });
export const bulkWriteBodySchema = z.strictObject({
  ops: z
    .array(
      z.union([
        z.strictObject({ insert: nsIndex, document: documentSchema }),
        z.strictObject({
          update: nsIndex,
          filter: documentSchema,
          updateMods: z
            .union([documentSchema, z.array(documentSchema)])
            .meta({ description: 'Update operators, a replacement document, or an update pipeline (as `u` of update).' }),
          multi: z.boolean().default(false),
          upsert: z.boolean().default(false),
          arrayFilters: arrayFiltersSchema,
          collation: writeCollation,
        }),
        z.strictObject({ delete: nsIndex, filter: documentSchema, multi: z.boolean().default(false), collation: writeCollation }),
      ]),
    )
    .min(1)
    .max(MAX_WRITE_BATCH),
  nsInfo: z
    .array(z.strictObject({ ns: z.string().meta({ description: 'db.collection' }) }))
    .min(1)
    .max(MAX_WRITE_BATCH),
  ordered: z.boolean().default(true).meta({ description: 'Stop at the first failed operation (default), or run them all.' }),
  errorsOnly: z.boolean().default(false).meta({ description: 'Answer only the failed operations in the cursor.' }),
  let: writeLet,
  comment,
  ...writeSession,
});

export const findAndModifyBodySchema = z
  .strictObject({
    query: documentSchema.default({}),
    sort: documentSchema.optional(),
    update: z.union([documentSchema, z.array(documentSchema)]).optional(),
    arrayFilters: arrayFiltersSchema,
    remove: z.boolean().default(false),
    new: z.boolean().default(false).meta({ description: 'Return the document after the update (true) or before it (false).' }),
    upsert: z.boolean().default(false),
    fields: documentSchema.optional().meta({ description: 'A projection of the returned document.' }),
    hint,
    collation: writeCollation,
    let: writeLet,
    comment,
    ...writeSession,
  })
  .refine((body) => body.remove !== (body.update !== undefined), { message: 'exactly one of "remove: true" and "update" is required' });

export const countBodySchema = z.strictObject({
  ...readSession,
  filter: documentSchema.default({}),
  skip: count.optional(),
  limit: count.optional(),
  hint,
  comment,
  maxTimeMS,
  collation,
});

export const distinctBodySchema = z.strictObject({
  ...readSession,
  key: z.string().min(1).meta({ description: 'The field (dotted path) whose distinct values to return.' }),
  filter: documentSchema.default({}),
  hint,
  comment,
  maxTimeMS,
  collation,
});

export const aggregateBodySchema = z.strictObject({
  ...readSession,
  pipeline: z
    .array(documentSchema)
    .max(1_000)
    .meta({ description: 'The stages, MongoDB\'s: `[{ "$match": ... }, { "$group": ... }]`. Leading `$match` stages target shards.' }),
  cursor: z.strictObject({ batchSize: count.optional() }).default({}).meta({ description: "The first batch's size (default 101)." }),
  let: documentSchema.optional().meta({ description: "Variables the pipeline's expressions read as `$$name`." }),
  explain: z
    .boolean()
    .default(false)
    .meta({ description: 'Answer how the pipeline is split and which shards it targets, instead of running it.' }),
  allowDiskUse: z.boolean().optional().meta({ description: "Accepted for MongoDB's drivers; stages hold their documents in memory." }),
  hint,
  comment,
  maxTimeMS,
  collation,
});

/** MongoDB's renameCollection admin command. */
export const renameCollectionBodySchema = z.strictObject({
  renameCollection: z.string().min(3).meta({ description: 'The collection to rename, "db.coll": an unsharded one.' }),
  to: z.string().min(3).meta({ description: 'Its new name, "db.other", in the same database.' }),
  dropTarget: z
    .boolean()
    .default(false)
    .meta({ description: 'Drop an existing collection of the new name first (NamespaceExists otherwise).' }),
  comment,
});

export const createIndexesBodySchema = z.strictObject({
  indexes: z
    .array(
      z.strictObject({
        key: z
          .record(z.string(), z.union([z.literal(1), z.literal('hashed')]))
          .meta({ description: 'Fields (dotted paths) in order, each 1 or "hashed".' }),
        name: z.string().min(1).max(128).optional().meta({ description: 'Default: MongoDB\'s, e.g. "a_1_b_hashed".' }),
        unique: z
          .boolean()
          .optional()
          .meta({ description: 'Only when the shard key is a prefix of the key (or the collection is unsharded).' }),
        collation: documentSchema.optional().meta({
          description:
            'Refused (CannotCreateIndex, 67): index keys are kept in byte order, so an index with a collation is not supported. A read may still take a collation; it then scans.',
        }),
      }),
    )
    .min(1)
    .max(64),
});

export type InsertBody = z.output<typeof insertBodySchema>;
export type FindBody = z.output<typeof findBodySchema>;
export type UpdateBody = z.output<typeof updateBodySchema>;
export type DeleteBody = z.output<typeof deleteBodySchema>;
export type FindAndModifyBody = z.output<typeof findAndModifyBodySchema>;
export type CountBody = z.output<typeof countBodySchema>;
export type DistinctBody = z.output<typeof distinctBodySchema>;
export type AggregateBody = z.output<typeof aggregateBodySchema>;
export type CreateIndexesBody = z.output<typeof createIndexesBodySchema>;
export type BulkWriteBody = z.output<typeof bulkWriteBodySchema>;
