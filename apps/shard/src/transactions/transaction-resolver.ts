import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type { Logger } from 'pino';
import type { DecisionAnswer, ResolveOutcome, TransactionId } from '@tessera/protocol';
import { LOGGER, type Periodic, SETTINGS, runPeriodically } from '@tessera/platform';
import type { ShardSettings } from '../shard.settings.js';
import type { PreparedTransaction } from './participant.store.js';
import { PeerRecovery } from './peer-recovery.js';
import { TransactionParticipants } from './transaction-participants.service.js';

const RESOLVE_INTERVAL_MS = 250;

/**
 * Ends this shard's prepared transactions whose decision did not come: every
 * `RESOLVE_INTERVAL_MS`, each one found at start or prepared for longer than
 * `TESSERA_TRANSACTION_RESOLVE_AFTER_MS` asks its coordinator and applies the answer; so does an
 * operator's resolveTransaction, at once. It never decides itself: only the coordinator's record
 * (or its presumed abort) keeps every participant to one outcome. While the coordinator's
 * process refuses connections, that record is read in its database (`PeerRecovery.decisionOf`).
 */
@Injectable()
export class TransactionResolver implements OnApplicationBootstrap, OnApplicationShutdown {
  private loop: Periodic | undefined;

  constructor(
    private readonly participants: TransactionParticipants,
    private readonly peers: PeerRecovery,
    @Inject(SETTINGS) private readonly settings: ShardSettings,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  onApplicationBootstrap(): void {
    this.loop = runPeriodically(
      () => this.resolveWaiting(),
      RESOLVE_INTERVAL_MS,
      (error) => this.logger.warn({ err: error }, 'resolving prepared transactions failed; retrying'),
    );
  }

  onApplicationShutdown(): void {
    this.loop?.stop();
  }

  /** An operator's resolveTransaction: the coordinator's decision now, applied if it has one. */
  async resolveNow(id: TransactionId): Promise<ResolveOutcome> {
    const prepared = this.participants.preparedHere(id);
    if (typeof prepared === 'string') return { outcome: prepared };
    return { outcome: await this.resolve(prepared) };
  }

  private async resolveWaiting(): Promise<void> {
    const waiting = this.participants.awaitingDecision(Date.now() - this.settings.TESSERA_TRANSACTION_RESOLVE_AFTER_MS);
    await Promise.all(
      waiting.map((prepared) =>
        this.resolve(prepared).catch((error: unknown) => this.logger.debug({ err: error }, 'coordinator not answering yet')),
      ),
    );
  }

  private async resolve(prepared: PreparedTransaction): Promise<DecisionAnswer['decision']> {
    const answer = await this.peers.decisionOf(prepared.coordinator, prepared.coordinatorStorage, prepared.id);
    if (answer.decision === 'pending') return 'pending';
    this.logger.info(
      { lsid: prepared.id.lsid.id, txnNumber: prepared.id.txnNumber, decision: answer.decision },
      'resolved a prepared transaction from its coordinator',
    );
    if (answer.decision === 'commit') await this.participants.commit({ ...prepared.id, commitTime: answer.commitTime });
    else await this.participants.abort({ ...prepared.id, decided: true });
    return answer.decision;
  }
}
