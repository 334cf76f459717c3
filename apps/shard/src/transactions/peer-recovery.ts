import { Inject, Injectable, type OnApplicationShutdown } from '@nestjs/common';
import type { Logger } from 'pino';
import { DataSource } from 'typeorm';
import { type DecisionAnswer, type Participant, type TransactionDecision, type TransactionId, notDelivered } from '@tessera/protocol';
import { InternalClients, LOGGER, SETTINGS } from '@tessera/platform';
import type { ShardSettings } from '../shard.settings.js';
import { CoordinatorStore } from './coordinator.store.js';
import { ParticipantStore, type PreparedTransaction } from './participant.store.js';
import { recordedDecision } from './recorded-decision.js';
import { TransactionReporter } from './transaction-reporter.js';

/** How long a coordinator is given to answer a question about a decision. */
const DECISION_TIMEOUT_MS = 5_000;

/** A peer shard whose process does not answer, and the database it keeps its transactions in. */
export interface PeerShard extends Participant {
  storage: string;
}

/**
 * Two-phase commit while a shard's process is down (kill -9, a crash, a restart under way). Its
 * database outlives it, and holds both what it decided as a coordinator and what it prepared as
 * a participant, so a peer resolves its transactions there instead of waiting for its restart,
 * as CockroachDB's push of an abandoned transaction record:
 *
 * - `decisionIn`: the decision recorded in the coordinator's database, or, when there is none, a
 *   presumed abort written there by the same insert the coordinator's commit uses. Whichever is
 *   written first is the decision, so a coordinator that was only slow, not dead, finds the
 *   abort and delivers it.
 * - `recover`: every transaction prepared in the peer's database is ended by its coordinator's
 *   decision: the peer's own record when it coordinated, otherwise its coordinator's answer.
 *
 * Peers hand each other their databases in the prepare phase (`coordinatorStorage`, the vote's
 * `storage`); a shard set to `TESSERA_DATABASE_URL_FOR_PEERS=off` hands out none and its
 * transactions wait for its restart. Only a request the peer provably never received (refused,
 * never connected) sends a shard to its database: a paused process is waited for.
 */
@Injectable()
export class PeerRecovery implements OnApplicationShutdown {
  /** This shard's database as handed to its peers, if it hands it out. */
  readonly ownStorage: string | undefined;
  private readonly databases = new Map<string, Promise<DataSource>>();
  private readonly sweeps = new Map<string, Promise<void>>();

  constructor(
    private readonly clients: InternalClients,
    private readonly reporter: TransactionReporter,
    @Inject(SETTINGS) settings: ShardSettings,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {
    const url = settings.TESSERA_DATABASE_URL_FOR_PEERS;
    this.ownStorage = url === 'off' ? undefined : url === '' ? settings.TESSERA_DATABASE_URL : url;
  }

  async onApplicationShutdown(): Promise<void> {
    const databases = await Promise.allSettled(this.databases.values());
    await Promise.all(databases.map((d) => (d.status === 'fulfilled' ? d.value.destroy() : undefined)));
  }

  /** The decision of a transaction `coordinator` coordinated, from its database. */
  async decisionIn(coordinator: PeerShard, id: TransactionId): Promise<TransactionDecision> {
    const database = await this.database(coordinator.storage);
    const { decision, presumed } = await recordedDecision(new CoordinatorStore(database), new ParticipantStore(database), id);
    if (presumed) {
      this.reporter.decided(id, 'abort', 'presumedAbort', {
        reason: `recorded in the database of ${coordinator.shard}, whose process does not answer`,
      });
    }
    return decision;
  }

  /** Resolves what `peer` has prepared, in its database; one sweep of a peer at a time. */
  recover(peer: PeerShard): void {
    if (this.sweeps.has(peer.storage)) return;
    const sweep = this.sweep(peer)
      .catch((error: unknown) => this.logger.warn({ shard: peer.shard, err: error }, "resolving a peer's transactions failed"))
      .finally(() => this.sweeps.delete(peer.storage));
    this.sweeps.set(peer.storage, sweep);
  }

  private async sweep(peer: PeerShard): Promise<void> {
    const store = new ParticipantStore(await this.database(peer.storage));
    for (const prepared of await store.preparedTransactions()) {
      try {
        const decision = await this.decisionFor(peer, prepared);
        if (decision === undefined) continue;
        if (decision.decision === 'commit') await store.commitPrepared(prepared.gid);
        else await store.rollbackPrepared(prepared.gid);
        this.logger.info(
          { shard: peer.shard, lsid: prepared.id.lsid.id, txnNumber: prepared.id.txnNumber, decision: decision.decision },
          "resolved a peer's prepared transaction in its database",
        );
      } catch (error) {
        this.logger.debug({ shard: peer.shard, err: error }, "a peer's prepared transaction stays for now");
      }
    }
  }

  /**
   * A coordinator's answer about a transaction it coordinated; while its process refuses
   * connections and its database is known (`storage`), the decision in its database, and the
   * rest of what it prepared there is resolved too.
   */
  async decisionOf(coordinator: Participant, storage: string | undefined, id: TransactionId): Promise<DecisionAnswer> {
    try {
      return await this.clients.shard(coordinator.url, DECISION_TIMEOUT_MS).transactionDecision(id);
    } catch (error) {
      if (storage === undefined || !notDelivered(error)) throw error;
      const peer = { ...coordinator, storage };
      this.recover(peer);
      return this.decisionIn(peer, id);
    }
  }

  /** The decision for a transaction `peer` prepared: its own record, or its coordinator's answer (none while pending). */
  private async decisionFor(peer: PeerShard, prepared: PreparedTransaction): Promise<TransactionDecision | undefined> {
    if (prepared.coordinator.shard === peer.shard) return this.decisionIn(peer, prepared.id);
    const answer = await this.decisionOf(prepared.coordinator, undefined, prepared.id);
    return answer.decision === 'pending' ? undefined : answer;
  }

  private database(url: string): Promise<DataSource> {
    let database = this.databases.get(url);
    if (database === undefined) {
      database = new DataSource({ type: 'postgres', url, extra: { max: 2, connectionTimeoutMillis: 2_000 }, logging: false }).initialize();
      database.catch(() => this.databases.delete(url));
      this.databases.set(url, database);
    }
    return database;
  }
}
