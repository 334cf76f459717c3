import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import { type ClusterTimestamp, TesseraError, labelInTransaction } from '@tessera/core';
import { type Participant, type TransactionFields, type TransactionId, notDelivered } from '@tessera/protocol';
import { LOGGER, VectorClockService } from '@tessera/platform';
import { ClusterRoutingService } from '../routing/cluster-routing.service.js';
import type { TransactionStatementOf } from './transaction-fields.js';

/** A transaction as the router runs it: its snapshot, and its participants in the order it reached them. */
export class RouterTransaction {
  state: 'inProgress' | 'committing' | 'committed' | 'aborted' = 'inProgress';
  /** Every shard a statement reached, and whether it wrote there. */
  readonly participants = new Map<string, { wrote: boolean }>();
  /** The first shard written to: the coordinator of two-phase commit, and the recovery shard. */
  coordinator: string | undefined;
  /** Whether a coordinateCommit was ever sent, whether or not it arrived. */
  coordinatorAsked = false;

  constructor(
    readonly id: TransactionId,
    readonly atClusterTime: ClusterTimestamp,
  ) {}

  get writeShards(): string[] {
    return [...this.participants].filter(([, p]) => p.wrote).map(([shard]) => shard);
  }
}

/** What commitTransaction answers: MongoDB's recovery token names the shard that knows the outcome. */
export interface CommitAnswer {
  ok: 1;
  recoveryToken?: { recoveryShardId: string };
}

/**
 * The router's side of cross-shard transactions (sharding-internals.md, "Transactions",
 * "Committing a Transaction", "Aborting a Transaction"): it keeps each transaction's snapshot
 * (the router's ClusterTime at the first statement) and its participants in memory, attaches
 * the transaction to every command it sends, aborts the transaction on any statement's error,
 * and commits by the reference's paths: no participant, one, read-only ones, or two-phase commit
 * through the coordinator (the first write shard). Errors carry MongoDB's labels.
 */
@Injectable()
export class TransactionRouter {
  /** The session's current transaction, by session id. */
  private readonly transactions = new Map<string, RouterTransaction>();

  constructor(
    private readonly cluster: ClusterRoutingService,
    private readonly clock: VectorClockService,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  /**
   * The transaction a statement belongs to, started when the statement says so (at `snapshot`,
   * or this router's ClusterTime). A newer txnNumber on the session aborts the older transaction.
   */
  async statement(of: TransactionStatementOf, snapshot?: ClusterTimestamp): Promise<RouterTransaction> {
    const current = this.transactions.get(of.lsid);
    if (current !== undefined && current.id.txnNumber > of.txnNumber) {
      throw new TesseraError(
        'TRANSACTION_TOO_OLD',
        `txnNumber ${of.txnNumber} is older than the session's transaction ${current.id.txnNumber}`,
      );
    }
    if (!of.start) {
      if (current === undefined || current.id.txnNumber !== of.txnNumber || current.state !== 'inProgress') {
        throw new TesseraError(
          'NO_SUCH_TRANSACTION',
          `transaction ${of.txnNumber} of session ${of.lsid} is not in progress on this router (it was aborted or committed, or started elsewhere)`,
          { errorLabels: ['TransientTransactionError'] },
        );
      }
      return current;
    }
    if (current !== undefined && current.id.txnNumber === of.txnNumber) {
      throw new TesseraError('CONFLICTING_OPERATION', `transaction ${of.txnNumber} of session ${of.lsid} has already started`, {
        retryable: false,
      });
    }
    if (current?.state === 'inProgress') await this.abortParticipants(current);
    const transaction = new RouterTransaction({ lsid: { id: of.lsid }, txnNumber: of.txnNumber }, snapshot ?? this.clock.now().clusterTime);
    this.transactions.set(of.lsid, transaction);
    return transaction;
  }

  /**
   * The transaction fields of a command to `shard`, which becomes a participant (a writing one
   * when `writes`); the first command to a shard starts the transaction there.
   */
  fieldsFor(transaction: RouterTransaction, shard: string, writes: boolean): TransactionFields {
    const known = transaction.participants.get(shard);
    if (known === undefined) transaction.participants.set(shard, { wrote: writes });
    else if (writes) known.wrote = true;
    if (writes) transaction.coordinator ??= shard;
    return {
      lsid: transaction.id.lsid,
      txnNumber: transaction.id.txnNumber,
      atClusterTime: transaction.atClusterTime,
      ...(known === undefined ? { startTransaction: true } : {}),
    };
  }

  /**
   * Runs a statement; on any error the transaction is aborted on every participant (MongoDB's
   * implicit abort) and the error answered with its label.
   */
  async run<T>(transaction: RouterTransaction, work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      await this.abortParticipants(transaction);
      throw error instanceof TesseraError ? labelInTransaction(error) : error;
    }
  }

  /**
   * commitTransaction. With a recovery token and no transaction here (another router ran it),
   * asks the recovery shard for the outcome, joining a commit under way.
   */
  async commit(of: TransactionStatementOf, recoveryShard?: string): Promise<CommitAnswer> {
    const transaction = this.transactions.get(of.lsid);
    if (transaction === undefined || transaction.id.txnNumber !== of.txnNumber) {
      if (recoveryShard === undefined)
        throw this.noSuchTransaction(of, 'pass the recoveryToken of the first commit to finish it elsewhere');
      return this.recoverCommit({ lsid: { id: of.lsid }, txnNumber: of.txnNumber }, recoveryShard);
    }
    if (transaction.state === 'aborted') throw this.noSuchTransaction(of, 'it was aborted');
    transaction.state = 'committing';
    try {
      await this.commitParticipants(transaction);
    } catch (error) {
      throw commitError(error);
    }
    transaction.state = 'committed';
    return { ok: 1, ...(transaction.coordinator !== undefined ? { recoveryToken: { recoveryShardId: transaction.coordinator } } : {}) };
  }

  /** abortTransaction: every participant aborts. */
  async abort(of: TransactionStatementOf): Promise<{ ok: 1 }> {
    const transaction = this.transactions.get(of.lsid);
    if (transaction === undefined || transaction.id.txnNumber !== of.txnNumber || transaction.state === 'aborted') {
      throw this.noSuchTransaction(of, 'it is not in progress here');
    }
    if (transaction.state === 'committing' || transaction.state === 'committed') {
      // As MongoDB's drivers and routers: once a commit is sent, only its outcome ends the
      // transaction (retry commitTransaction to learn it).
      throw new TesseraError(
        'ILLEGAL_OPERATION',
        `transaction ${of.txnNumber} of session ${of.lsid}: cannot call abortTransaction after calling commitTransaction`,
      );
    }
    await this.abortParticipants(transaction);
    return { ok: 1 };
  }

  /** The commit paths of the reference, by the number of participants and of write shards. */
  private async commitParticipants(transaction: RouterTransaction): Promise<void> {
    const shards = [...transaction.participants.keys()];
    const writers = transaction.writeShards;
    if (shards.length === 0) return;
    if (shards.length === 1 || writers.length === 0) {
      await Promise.all(shards.map(async (shard) => (await this.cluster.shard(shard)).commitTransaction(transaction.id)));
      return;
    }
    const coordinator = transaction.coordinator!;
    const ordered = [coordinator, ...shards.filter((s) => s !== coordinator)];
    const participants: Participant[] = await Promise.all(
      ordered.map(async (shard) => ({ shard, url: (await this.cluster.shard(shard)).url })),
    );
    const firstAsk = !transaction.coordinatorAsked;
    transaction.coordinatorAsked = true;
    let decision;
    try {
      decision = await (await this.cluster.shard(coordinator)).coordinateCommitTransaction({ ...transaction.id, participants });
    } catch (error) {
      if (error instanceof TesseraError && error.code === 'HOST_UNREACHABLE') {
        await this.releaseParticipants(transaction, firstAsk && notDelivered(error), error);
      }
      throw error;
    }
    if (decision.decision === 'abort') {
      transaction.state = 'aborted';
      throw new TesseraError(
        'NO_SUCH_TRANSACTION',
        `transaction ${transaction.id.txnNumber} of session ${transaction.id.lsid.id} was aborted: a participant could not prepare`,
        {
          errorLabels: ['TransientTransactionError'],
        },
      );
    }
  }

  /**
   * The coordinator's process could not be reached, or its connection broke (it died, most
   * likely): what the participants hold is aborted now rather than at their lifetime limit,
   * since a client that gives up on the commit would leave them holding connections and locks.
   * Safe whatever the coordinator began: a prepared participant refuses a router's abort, and one
   * not yet prepared has not voted, so no commit can be decided without it. When the request
   * provably never arrived and no earlier one was sent (`neverAsked`), no two-phase commit began
   * and the transaction is known to be aborted: the client retries it whole. A coordinator that
   * only timed out (paused, slow) is left to finish.
   */
  private async releaseParticipants(transaction: RouterTransaction, neverAsked: boolean, error: unknown): Promise<void> {
    if (!neverAsked) {
      await this.tellParticipantsToAbort(transaction);
      return;
    }
    await this.abortParticipants(transaction);
    throw new TesseraError(
      'NO_SUCH_TRANSACTION',
      `transaction ${transaction.id.txnNumber} of session ${transaction.id.lsid.id} was aborted: its coordinator ${transaction.coordinator} could not be reached (${(error as Error).message})`,
      { errorLabels: ['TransientTransactionError'], cause: error },
    );
  }

  private async recoverCommit(id: TransactionId, recoveryShard: string): Promise<CommitAnswer> {
    let decision;
    try {
      decision = await (await this.cluster.shard(recoveryShard)).coordinateCommitTransaction({ ...id, participants: [] });
    } catch (error) {
      throw commitError(error);
    }
    if (decision.decision === 'abort')
      throw this.noSuchTransaction({ lsid: id.lsid.id, txnNumber: id.txnNumber, start: false }, 'it was aborted');
    return { ok: 1, recoveryToken: { recoveryShardId: recoveryShard } };
  }

  /** Tells every participant to abort; one that cannot be reached aborts on its own (reaper, presumed abort). */
  private async abortParticipants(transaction: RouterTransaction): Promise<void> {
    transaction.state = 'aborted';
    await this.tellParticipantsToAbort(transaction);
  }

  private async tellParticipantsToAbort(transaction: RouterTransaction): Promise<void> {
    await Promise.all(
      [...transaction.participants.keys()].map(async (shard) => {
        try {
          await (await this.cluster.shard(shard)).abortTransaction(transaction.id);
        } catch (error) {
          this.logger.debug({ shard, err: error }, 'a participant did not take the abort; it aborts on its own');
        }
      }),
    );
  }

  private noSuchTransaction(of: TransactionStatementOf, why: string): TesseraError {
    return new TesseraError('NO_SUCH_TRANSACTION', `transaction ${of.txnNumber} of session ${of.lsid} is not known here: ${why}`, {
      errorLabels: ['TransientTransactionError'],
    });
  }
}

/**
 * A commit that failed: a refusal the coordinator or participant answered stands; a failure to
 * reach it leaves the outcome unknown (`UnknownTransactionCommitResult`: retry the commit).
 */
function commitError(error: unknown): unknown {
  if (!(error instanceof TesseraError)) return error;
  if (error.errorLabels.includes('TransientTransactionError') || (error.answeredBy !== undefined && !error.retryable)) return error;
  return error.withLabel('UnknownTransactionCommitResult');
}
