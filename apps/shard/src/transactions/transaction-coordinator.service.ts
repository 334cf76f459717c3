import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type { Logger } from 'pino';
import { type ClusterTimestamp, TesseraError, compareClusterTimestamps } from '@tessera/core';
import {
  type CoordinateCommit,
  type CoordinatedTransaction,
  type DecisionAnswer,
  type Participant,
  type ShardClient,
  type TransactionDecision,
  type TransactionId,
  notDelivered,
} from '@tessera/protocol';
import { Failpoints, InternalClients, LOGGER, type Periodic, runPeriodically } from '@tessera/platform';
import { CoordinatorStore } from './coordinator.store.js';
import { transactionKey } from './open-transaction.js';
import { ParticipantStore } from './participant.store.js';
import { PeerRecovery } from './peer-recovery.js';
import { recordedDecision } from './recorded-decision.js';
import { TransactionParticipants } from './transaction-participants.service.js';
import { TransactionReporter } from './transaction-reporter.js';

/** The participant commands the coordinator sends, as `ShardClient` has them. */
type ParticipantPort = Pick<ShardClient, 'reserveCommitTime' | 'prepareTransaction' | 'commitTransaction' | 'abortTransaction'>;

/** How long a participant is given to answer a phase's request. */
const PARTICIPANT_TIMEOUT_MS = 10_000;
/** The pause between two attempts to deliver a decision to a participant that did not answer. */
const REDELIVER_MS = 200;
const HOUSEKEEPING_MS = 60_000;
/** Presumed aborts are kept this long: far past any participant's question about them. */
const ABORT_RECORD_MS = 10 * 60_000;

/**
 * The transaction coordinator on the shard the router chose (sharding-internals.md, "Two-phase
 * Commit Protocol"), with presumed abort: nothing is persisted before the decision, so a
 * coordinator that dies before deciding has decided abort, and any question about a transaction
 * it has no record of is answered abort, after recording that (so that no later commit of the
 * same transaction can decide otherwise). The phases, one method each:
 *
 * 1. `reserveCommitTimes`: every participant reserves a commit time; the transaction commits at
 *    the largest, so no participant has served a read at or after it.
 * 2. `prepareParticipants`: every participant stamps its writes with that time and votes.
 * 3. `persistDecision`: the decision and participant list, durable before any commit is sent.
 * 4. `deliverDecision`: commit (or abort) on every participant, retried until each answers;
 *    then the record is forgotten.
 *
 * A commit decision found at start is delivered again (recovery after a kill).
 */
@Injectable()
export class TransactionCoordinator implements OnApplicationBootstrap, OnApplicationShutdown {
  /** Commits under way in this process, by transaction: its participants (for operators) and the decision once made. */
  private readonly coordinating = new Map<string, { id: TransactionId; participants: string[]; decided: Promise<TransactionDecision> }>();
  private housekeeping: Periodic | undefined;
  private stopped = false;
  /** This shard's own participant, reached without the network. */
  private readonly local: ParticipantPort;

  constructor(
    private readonly store: CoordinatorStore,
    private readonly participants: ParticipantStore,
    private readonly clients: InternalClients,
    participant: TransactionParticipants,
    private readonly reporter: TransactionReporter,
    private readonly peers: PeerRecovery,
    private readonly failpoints: Failpoints,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {
    this.local = {
      reserveCommitTime: (id) => participant.reserveCommitTime(id),
      prepareTransaction: (command) => participant.prepare(command),
      commitTransaction: (command) => participant.commit(command),
      abortTransaction: (command) => participant.abort(command),
    };
  }

  async onApplicationBootstrap(): Promise<void> {
    for (const record of await this.store.commitsInProgress()) {
      this.logger.info({ lsid: record.id.lsid.id, txnNumber: record.id.txnNumber }, 'delivering a commit decision found at start');
      void this.deliverDecision(record.id, record.participants, record.decision);
    }
    this.housekeeping = runPeriodically(
      async () => void (await this.store.trimAborts(ABORT_RECORD_MS)),
      HOUSEKEEPING_MS,
      (error) => this.logger.warn({ err: error }, 'trimming presumed aborts failed'),
    );
  }

  onApplicationShutdown(): void {
    this.stopped = true;
    this.housekeeping?.stop();
  }

  /**
   * Commits a transaction over its participants (the first is this shard) and answers the
   * decision once it is durable; the commit phase goes on after. With no participants, joins a
   * commit under way or answers the recorded decision (a retried commit from another router).
   */
  coordinateCommit(command: CoordinateCommit): Promise<TransactionDecision> {
    const key = transactionKey(command);
    const running = this.coordinating.get(key);
    if (running !== undefined) return running.decided;
    const id = { lsid: command.lsid, txnNumber: command.txnNumber };
    const decided = this.decide(id, command.participants).finally(() => this.coordinating.delete(key));
    this.coordinating.set(key, { id, participants: command.participants.map((p) => p.shard), decided });
    return decided;
  }

  /** The commits this shard is deciding or delivering, for operators. */
  async describe(): Promise<CoordinatedTransaction[]> {
    const deciding = [...this.coordinating.values()].map(({ id, participants }): CoordinatedTransaction => ({
      lsid: id.lsid.id,
      txnNumber: id.txnNumber,
      phase: 'deciding',
      participants,
    }));
    const committing = (await this.store.commitsInProgress()).map((record): CoordinatedTransaction => ({
      lsid: record.id.lsid.id,
      txnNumber: record.id.txnNumber,
      phase: 'committing',
      participants: record.participants.map((p) => p.shard),
    }));
    return [...deciding, ...committing];
  }

  /** A prepared participant's question: the decision, `pending` while one is being made. */
  async decision(id: TransactionId): Promise<DecisionAnswer> {
    if (this.coordinating.has(transactionKey(id))) return { decision: 'pending' };
    return this.recordedDecision(id);
  }

  private async recordedDecision(id: TransactionId): Promise<TransactionDecision> {
    const { decision, presumed } = await recordedDecision(this.store, this.participants, id);
    if (presumed) this.reporter.decided(id, 'abort', 'presumedAbort', { reason: 'asked for a decision it has no record of' });
    return decision;
  }

  private async decide(id: TransactionId, participants: readonly Participant[]): Promise<TransactionDecision> {
    if (participants.length === 0) return this.recordedDecision(id);
    const recorded = await this.store.find(id);
    if (recorded !== undefined) return recorded.decision;
    // A commit retried after it completed: this shard, its first participant, committed it.
    const committedAt = await this.participants.committedAt(id);
    if (committedAt !== undefined) return { decision: 'commit', commitTime: committedAt };
    let decision: TransactionDecision;
    let reason = 'a participant asked for the decision first (presumed abort)';
    let storages = new Map<string, string>();
    try {
      const commitTime = await this.reserveCommitTimes(id, participants);
      storages = await this.prepareParticipants(id, participants, commitTime);
      // Test-only: a kill here leaves every participant prepared and no decision recorded.
      await this.failpoints.pauseAt('shard.coordinator.beforeDecision', id.lsid.id);
      decision = await this.persistDecision(id, participants, { decision: 'commit', commitTime });
    } catch (error) {
      this.logger.info({ lsid: id.lsid.id, txnNumber: id.txnNumber, err: error }, 'aborting a transaction that could not prepare');
      reason = `a participant could not prepare: ${(error as Error).message}`;
      decision = { decision: 'abort' };
    }
    this.reporter.decided(id, decision.decision, 'coordinator', {
      participants: participants.map((p) => p.shard),
      ...(decision.decision === 'commit' ? { commitTime: decision.commitTime } : { reason }),
    });
    void this.deliverDecision(id, participants, decision, storages);
    return decision;
  }

  private async reserveCommitTimes(id: TransactionId, participants: readonly Participant[]): Promise<ClusterTimestamp> {
    const reserved = await Promise.all(participants.map((p) => this.client(p, participants).reserveCommitTime(id)));
    return reserved.map((r) => r.reservedTime).reduce((a, b) => (compareClusterTimestamps(a, b) >= 0 ? a : b));
  }

  /** Answers the databases the participants handed out with their votes, by shard. */
  private async prepareParticipants(
    id: TransactionId,
    participants: readonly Participant[],
    commitTime: ClusterTimestamp,
  ): Promise<Map<string, string>> {
    const storage = this.peers.ownStorage;
    const votes = await Promise.all(
      participants.map((p) =>
        this.client(p, participants).prepareTransaction({
          ...id,
          commitTime,
          coordinator: participants[0]!,
          ...(storage === undefined ? {} : { coordinatorStorage: storage }),
        }),
      ),
    );
    return new Map(votes.flatMap((vote, n) => (vote.storage === undefined ? [] : [[participants[n]!.shard, vote.storage]])));
  }

  private persistDecision(
    id: TransactionId,
    participants: readonly Participant[],
    decision: TransactionDecision,
  ): Promise<TransactionDecision> {
    return this.store.decide(id, participants, decision);
  }

  /**
   * Delivers the decision to every participant until each has applied it, then forgets a commit.
   * A participant whose process refuses the decision has it applied in its database meanwhile
   * (`storages`: the ones handed out with the votes).
   */
  private async deliverDecision(
    id: TransactionId,
    participants: readonly Participant[],
    decision: TransactionDecision,
    storages: ReadonlyMap<string, string> = new Map(),
  ): Promise<void> {
    await Promise.all(
      participants.map(async (p, n) => {
        // Test-only: widens the time in which the coordinator has committed and the others not yet.
        if (n > 0) await this.failpoints.pauseAt('shard.coordinator.deliverToOthers', id.lsid.id);
        await this.deliverTo(p, id, decision, participants, storages.get(p.shard));
      }),
    );
    if (decision.decision === 'commit' && !this.stopped) await this.store.forget(id);
  }

  private async deliverTo(
    participant: Participant,
    id: TransactionId,
    decision: TransactionDecision,
    participants: readonly Participant[],
    storage: string | undefined,
  ): Promise<void> {
    const client = this.client(participant, participants);
    for (let attempt = 0; !this.stopped; attempt++) {
      try {
        if (decision.decision === 'commit') await client.commitTransaction({ ...id, commitTime: decision.commitTime });
        else await client.abortTransaction({ ...id, decided: true });
        return;
      } catch (error) {
        if (
          error instanceof TesseraError &&
          error.code === 'NO_SUCH_TRANSACTION' &&
          (error.answeredBy !== undefined || client === this.local)
        ) {
          // Only an abort can meet a participant that forgot the transaction; a commit cannot (it
          // was prepared there and answers from its record), so this is logged loudly.
          if (decision.decision === 'commit')
            this.logger.error({ shard: participant.shard, err: error }, 'a participant lost a committed transaction');
          return;
        }
        if (storage !== undefined && notDelivered(error)) this.peers.recover({ ...participant, storage });
        if (attempt % 25 === 0)
          this.logger.warn({ shard: participant.shard, err: error }, `delivering the ${decision.decision} decision; retrying`);
        await new Promise((resolve) => setTimeout(resolve, REDELIVER_MS));
      }
    }
  }

  /**
   * How a phase reaches a participant: this shard itself (the first participant: the router
   * sends coordinateCommit to it) directly, the others over the network.
   */
  private client(participant: Participant, participants?: readonly Participant[]): ParticipantPort {
    if (participants !== undefined && participant === participants[0]) return this.local;
    return this.clients.shard(participant.url, PARTICIPANT_TIMEOUT_MS);
  }
}
