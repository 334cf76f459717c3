import { z } from 'zod';
import { REPORTED_DONOR_PHASES, TesseraError } from '@tessera/core';
import { wireChunkRangeSchema } from './catalog-messages.js';
import { indexSpecSchema } from './data-messages.js';
import { keyPatternSchema, namespaceSchema, nodeUrlSchema, shardNameSchema } from './messages.js';

/**
 * The live migration protocol between a config server, a donor and a recipient
 * (migrations-internals.md): the config server's moveRange, the donor's registration and
 * coordination, the recipient's clone and catch-up, and the decision that ends it.
 */

const migrationId = z.uuid();

/** A shard key document of the collection's key pattern, in Extended JSON: `{ x: 10 }`. */
const shardKeyDocumentSchema = z.record(z.string(), z.unknown());

/** The config server's moveRange (MongoDB's `moveRange`): with only `min`, the chunk that starts there. */
export const moveRangeRequestSchema = z.strictObject({
  ns: namespaceSchema,
  min: shardKeyDocumentSchema,
  max: shardKeyDocumentSchema.optional(),
  toShard: shardNameSchema,
  forceJumbo: z.boolean().default(false),
  /** Wait for the donor's range deletion before answering (MongoDB's `_waitForDelete`). */
  waitForDelete: z.boolean().default(false),
});
export type MoveRangeRequest = z.input<typeof moveRangeRequestSchema>;

/** MongoDB's `moveChunk`: the chunk holding the document `find` (by shard key), or the chunk with these `bounds`. */
export const moveChunkRequestSchema = z
  .strictObject({
    ns: namespaceSchema,
    find: shardKeyDocumentSchema.optional(),
    bounds: z.tuple([shardKeyDocumentSchema, shardKeyDocumentSchema]).optional(),
    to: shardNameSchema,
    forceJumbo: z.boolean().default(false),
    waitForDelete: z.boolean().default(false),
  })
  .refine((r) => (r.find === undefined) !== (r.bounds === undefined), { message: 'give exactly one of find and bounds' });
export type MoveChunkRequest = z.input<typeof moveChunkRequestSchema>;

/**
 * The migration whose range refused a split or merge: the id a commit's `CONFLICTING_OPERATION`
 * with `problem: 'migrating'` names; undefined for any other error.
 */
export function migrationHolding(error: unknown): string | undefined {
  if (!(error instanceof TesseraError) || error.details?.problem !== 'migrating') return undefined;
  return typeof error.details.migrationId === 'string' ? error.details.migrationId : undefined;
}

/** The phases a migration goes through, in order, as the donor reports them (its phase machine's). */
export const MIGRATION_PHASES = REPORTED_DONOR_PHASES;
export type MigrationPhase = (typeof MIGRATION_PHASES)[number] | 'aborted';

export interface MoveRangeResult {
  migrationId: string;
  ns: string;
  donor: string;
  recipient: string;
  /** The range that moved (after the split, for a sub-range). */
  range: { min: unknown[]; max: unknown[] };
  documentsCloned: number;
  bytesCloned: number;
  criticalSectionMs: number;
  /** Each phase with the time it began (ISO 8601). */
  phases: Array<{ phase: MigrationPhase; at: string }>;
}

/**
 * How the recipient clones a migration the balancer's load throttle slows down: batches of
 * `batchDocuments`, and after each a wait of `waitRatio` times as long as the batch took
 * (fetched and written), so the clone runs at 1 ÷ (1 + waitRatio) of its speed in such batches.
 * MongoDB paces every clone alike, with a fixed batch size and delay
 * (migrateCloneInsertionBatchSize, migrateCloneInsertionBatchDelayMS): a delay fit for small
 * documents crawls with large ones. Without it: the shard's batch, no wait.
 */
export const clonePacingSchema = z.strictObject({
  batchDocuments: z.number().int().min(1).max(100_000),
  waitRatio: z.number().min(0).max(1_000),
});
export type ClonePacing = z.infer<typeof clonePacingSchema>;

/** Config server → donor: run this migration (or join it, if it is the one running). */
export const donorMoveRangeRequestSchema = z.strictObject({
  migrationId,
  ns: namespaceSchema,
  collectionUuid: z.uuid(),
  range: wireChunkRangeSchema,
  recipient: shardNameSchema,
  recipientUrl: nodeUrlSchema,
  forceJumbo: z.boolean(),
  waitForDelete: z.boolean(),
  /** The collection's max chunk size: a range over twice this is jumbo. */
  maxChunkSizeBytes: z.number().int().min(1),
  clonePacing: clonePacingSchema.optional(),
});
export type DonorMoveRangeRequest = z.input<typeof donorMoveRangeRequestSchema>;

/** Donor → recipient (MongoDB's `_recvChunkStart`). */
export const recvChunkStartRequestSchema = z.strictObject({
  migrationId,
  ns: namespaceSchema,
  collectionUuid: z.uuid(),
  keyPattern: keyPatternSchema,
  range: wireChunkRangeSchema,
  donor: shardNameSchema,
  donorUrl: nodeUrlSchema,
  /** The donor's secondary indexes, built on the recipient before any document arrives. */
  indexes: z.array(indexSpecSchema).max(64),
  clonePacing: clonePacingSchema.optional(),
});
export type RecvChunkStartRequest = z.input<typeof recvChunkStartRequestSchema>;

export const migrationIdRequestSchema = z.strictObject({ migrationId });

/** Recipient → donor (MongoDB's `_migrateClone`): the next rows after `after`, in shard key order. */
export const migrateCloneRequestSchema = z.strictObject({
  migrationId,
  after: z.strictObject({ key: z.string().regex(/^[0-9a-f]*$/), id: z.string().regex(/^[0-9a-f]*$/) }).optional(),
  limit: z.number().int().min(1).max(100_000),
});
export type MigrateCloneRequest = z.input<typeof migrateCloneRequestSchema>;

/** Recipient → donor (MongoDB's `_transferMods`): up to `limit` documents written since the last call. */
export const transferModsRequestSchema = z.strictObject({ migrationId, limit: z.number().int().min(1).max(100_000) });
export type TransferModsRequest = z.input<typeof transferModsRequestSchema>;

/**
 * Recipient → donor (MongoDB's `_getNextSessionMods`): the retry history of the range's
 * documents, up to `limit` sessions after `afterLsid`, in lsid order.
 */
export const sessionHistoryRequestSchema = z.strictObject({
  migrationId,
  afterLsid: z.uuid().optional(),
  limit: z.number().int().min(1).max(10_000),
});
export type SessionHistoryRequest = z.input<typeof sessionHistoryRequestSchema>;

/**
 * A session's history for the range: its current txnNumber, the statements of that txnNumber
 * whose documents lie in the range, and its findAndModify image of that txnNumber. Results and
 * images travel as the JSON text the donor stored, so that a retry on the recipient answers
 * byte for byte what the first attempt answered.
 */
export const migratedSessionSchema = z.strictObject({
  lsid: z.uuid(),
  txnNumber: z.number().int().min(0),
  lastWriteAt: z.iso.datetime({ offset: true }),
  statements: z.array(z.strictObject({ stmtId: z.number().int().min(0), shardKey: z.string().regex(/^[0-9a-f]*$/), result: z.string() })),
  image: z.strictObject({ kind: z.enum(['preImage', 'postImage']), document: z.string() }).optional(),
  /**
   * The donor's history of the session's txnNumber in the collection may miss statements of the
   * range: some of its statements wrote no document, so have no shard key to tell where they
   * belong. The recipient then answers a retry of a statement it has no record of with
   * IncompleteTransactionHistory instead of running it (MongoDB's dead-end sentinel).
   */
  incompleteHistory: z.literal(true).optional(),
});
export type MigratedSession = z.infer<typeof migratedSessionSchema>;

export const sessionHistoryBatchSchema = z.strictObject({ sessions: z.array(migratedSessionSchema) });
export type SessionHistoryBatch = z.infer<typeof sessionHistoryBatchSchema>;

/** The recipient's state, as MongoDB's `_recvChunkStatus` reports it. */
export type RecipientState = 'waitingForRangeDeletion' | 'cloning' | 'catchup' | 'steady' | 'committing' | 'done' | 'failed';

export interface RecvChunkStatus {
  migrationId: string;
  state: RecipientState;
  documentsCloned: number;
  bytesCloned: number;
  /** Documents re-sent or deleted by the catch-up. */
  modsApplied: number;
  /** Sessions whose retry history was taken from the donor (counted on each pull). */
  sessionsMigrated: number;
  /** Time the clone waited between batches, by its `clonePacing`. */
  clonePausedMs: number;
  error?: { code: string; message: string };
}

/**
 * Config server → recipient: the load throttle's pacing changed, for the rest of this
 * migration's clone (null: full speed again). A migration of several seconds then follows the
 * throttle as it goes, not only as it stood when the migration started.
 */
export const recvChunkPacingRequestSchema = z.strictObject({ migrationId, clonePacing: clonePacingSchema.nullable() });
export type RecvChunkPacingRequest = z.input<typeof recvChunkPacingRequestSchema>;

export const recvChunkReleaseRequestSchema = z.strictObject({ migrationId, decision: z.enum(['committed', 'aborted']) });
export type RecvChunkReleaseRequest = z.input<typeof recvChunkReleaseRequestSchema>;

/** Donor → config server, when a restart finds a migration without a decision. */
export const decideMigrationRequestSchema = z.strictObject({ migrationId });
export type MigrationDecision = 'committed' | 'aborted';

/** What a shard is doing now: the migrations it donates or receives, oldest first. */
export interface ShardMigrationStatus {
  migrations: Array<{ migrationId: string; role: 'donor' | 'recipient'; ns: string; otherShard: string; since: string }>;
  rangeDeletionsPending: number;
}

/**
 * Documents travel between shards as lines, one per document, built and read without parsing
 * the document: `u <id hex> <shard key hex> <size> <document JSON>` for a document to write
 * and `d <id hex>` for one to delete, fields separated by tabs. Stored documents are compact
 * JSON (no raw tab or newline), so the document is simply the rest of its line.
 */
export interface TransferredDocument {
  op: 'u' | 'd';
  id: string;
  key: string;
  size: number;
  doc: string;
}

export function documentLine(id: string, key: string, size: number, doc: string): string {
  return `u\t${id}\t${key}\t${size}\t${doc}\n`;
}

export function deletionLine(id: string): string {
  return `d\t${id}\n`;
}

/** The non-empty lines of a bulk transfer body. */
export function* transferLines(text: string): Generator<string> {
  let start = 0;
  while (start < text.length) {
    let end = text.indexOf('\n', start);
    if (end === -1) end = text.length;
    const line = text.slice(start, end);
    start = end + 1;
    if (line !== '') yield line;
  }
}

export function parseTransferLines(text: string): TransferredDocument[] {
  const documents: TransferredDocument[] = [];
  for (const line of transferLines(text)) {
    if (line.startsWith('d\t')) {
      documents.push({ op: 'd', id: line.slice(2), key: '', size: 0, doc: '' });
      continue;
    }
    const a = line.indexOf('\t', 2);
    const b = line.indexOf('\t', a + 1);
    const c = line.indexOf('\t', b + 1);
    if (!line.startsWith('u\t') || a < 0 || b < 0 || c < 0) throw new Error(`malformed transfer line: ${line.slice(0, 80)}`);
    documents.push({
      op: 'u',
      id: line.slice(2, a),
      key: line.slice(a + 1, b),
      size: Number(line.slice(b + 1, c)),
      doc: line.slice(c + 1),
    });
  }
  return documents;
}

/** MongoDB's `dataSize` over a range of a collection on one shard (orphans included, as MongoDB's). */
export const dataSizeRequestSchema = z.strictObject({ ns: namespaceSchema, range: wireChunkRangeSchema.optional() });
export type DataSizeRequest = z.input<typeof dataSizeRequestSchema>;
export interface DataSizeResult {
  size: number;
  numObjects: number;
}

/**
 * MongoDB's `_shardsvrGetStatsForBalancing`: the bytes of each collection this shard owns, which
 * is what it stores less the orphans its range deletion tasks are waiting to delete (the ranges
 * it gave away and not yet cleaned, and the ranges it is receiving and does not own yet; a range
 * it is giving away is still its own until the migration commits). A shard keeps its totals as
 * it writes, so an answer costs the changes since the last one, not a read of the collection.
 */
export const statsForBalancingRequestSchema = z.strictObject({
  namespaces: z.array(namespaceSchema).min(1).max(10_000),
});
export type StatsForBalancingRequest = z.input<typeof statsForBalancingRequestSchema>;
export interface StatsForBalancingResult {
  stats: Array<{ ns: string; collSize: number }>;
}

/** MongoDB's `splitVector`: split points that cut the range into pieces of about half `maxChunkSizeBytes`. */
export const splitVectorRequestSchema = z.strictObject({
  ns: namespaceSchema,
  range: wireChunkRangeSchema,
  maxChunkSizeBytes: z.number().int().min(1),
  maxSplitPoints: z.number().int().min(1).max(8192).optional(),
});
export type SplitVectorRequest = z.input<typeof splitVectorRequestSchema>;
export interface SplitVectorResult {
  /** Strictly increasing shard keys strictly inside the range; empty when the range is under the max or cannot be split. */
  splitKeys: unknown[][];
  /** True when the range is over the max but every document has the same shard key (a jumbo chunk). */
  unsplittable: boolean;
}
