import { z } from 'zod';
import { clusterTimestampSchema } from './catalog-messages.js';
import { lsidSchema } from './data-messages.js';

/**
 * Cross-shard transactions between routers and shards (sharding-internals.md, "Transactions",
 * "Two-phase Commit Protocol"). A transaction is named by its session and txnNumber.
 */
const transactionId = {
  lsid: lsidSchema,
  txnNumber: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
};
export const transactionIdSchema = z.strictObject(transactionId);
export type TransactionId = z.infer<typeof transactionIdSchema>;

/** A participant as the coordinator reaches it: the shard's id and URL. */
export const participantSchema = z.strictObject({ shard: z.string().min(1), url: z.string().min(1) });
export type Participant = z.infer<typeof participantSchema>;

/**
 * Asks a participant for a commit time it can take: it ticks its clock and holds reads at or
 * after that time back until the transaction is resolved. The coordinator commits at the
 * largest of its participants' times, so no participant has already served a read at it.
 */
export const reserveCommitTimeSchema = transactionIdSchema;

/**
 * The prepare phase: the participant stamps what the transaction wrote with `commitTime`, makes
 * it durable (PREPARE TRANSACTION) and votes. `coordinator` is where it asks for the decision if
 * none comes; `coordinatorStorage`, the coordinator's database, is where it finds the decision
 * (or records the presumed abort) while the coordinator's process is down.
 */
export const prepareTransactionSchema = z.strictObject({
  ...transactionId,
  commitTime: clusterTimestampSchema,
  coordinator: participantSchema,
  coordinatorStorage: z.string().min(1).optional(),
});
export type PrepareTransaction = z.infer<typeof prepareTransactionSchema>;

/**
 * A participant's vote. `storage` is its database, where the coordinator applies the decision
 * while the participant's process is down.
 */
export interface PrepareVote {
  prepared: true;
  storage?: string;
}

/**
 * The commit phase, or a single-participant commit. `commitTime` is the decided one after a
 * prepare; without it the participant commits on its own at a time it takes (one participant,
 * or a read-only one).
 */
export const commitTransactionSchema = z.strictObject({ ...transactionId, commitTime: clusterTimestampSchema.optional() });
export type CommitTransaction = z.infer<typeof commitTransactionSchema>;

/**
 * Aborts the transaction on a participant. A router's abort (before commit) ends a transaction
 * not yet prepared; a prepared one refuses it (`PreparedTransactionInProgress`): having voted,
 * it ends only by its coordinator's decision, sent with `decided: true`.
 */
export const abortTransactionSchema = z.strictObject({
  ...transactionId,
  decided: z.literal(true).optional(),
  /** Who asks, for the changelog: a router (the default) or an operator through the config server. */
  by: z.enum(['router', 'operator']).optional(),
});
export type AbortTransaction = z.infer<typeof abortTransactionSchema>;

/**
 * Starts two-phase commit on the coordinator with the transaction's participants; an empty list
 * only joins a commit under way or answers its decision (a client's retried commit through
 * another router, with the recovery token).
 */
export const coordinateCommitSchema = z.strictObject({ ...transactionId, participants: z.array(participantSchema).max(1_000) });
export type CoordinateCommit = z.infer<typeof coordinateCommitSchema>;

export type TransactionDecision = { decision: 'commit'; commitTime: z.infer<typeof clusterTimestampSchema> } | { decision: 'abort' };

/**
 * An operator's resolveTransaction on one participant: asks the transaction's coordinator for
 * its decision now and applies it; `pending` while the coordinator is deciding, `notPrepared`
 * (open, not yet voted) or `notHere`.
 */
export const resolveTransactionSchema = transactionIdSchema;
export interface ResolveOutcome {
  outcome: 'commit' | 'abort' | 'pending' | 'notPrepared' | 'notHere';
}

/** A participant's question to the coordinator of a transaction it prepared. */
export const decisionQuerySchema = transactionIdSchema;
/** `pending` while the coordinator is still collecting votes. */
export type DecisionAnswer = TransactionDecision | { decision: 'pending' };

/** A transaction as one participant holds it, for operators (GET /internal/transactions). */
export interface ParticipantTransaction {
  lsid: string;
  txnNumber: number;
  /** `recovered`: prepared, found at start, waiting for its coordinator's decision. */
  state: 'inProgress' | 'reserved' | 'prepared' | 'recovered';
  /** When this shard took its first statement (ISO); null for a recovered one. */
  startedAt: string | null;
  /** The shard to ask for the decision, once prepared. */
  coordinator: string | null;
  /** The collections it wrote here. */
  namespaces: string[];
}

/** A commit a coordinator is running or delivering. */
export interface CoordinatedTransaction {
  lsid: string;
  txnNumber: number;
  /** `deciding`: collecting votes; `committing`: the commit decision is durable and being delivered. */
  phase: 'deciding' | 'committing';
  participants: string[];
}

/** What a shard answers GET /internal/transactions. */
export interface ShardTransactions {
  participants: ParticipantTransaction[];
  coordinating: CoordinatedTransaction[];
}
