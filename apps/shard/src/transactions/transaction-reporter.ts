import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type { Logger } from 'pino';
import type { ClusterTimestamp } from '@tessera/core';
import { InternalClients, LOGGER, type Periodic, runPeriodically } from '@tessera/platform';
import type { TransactionId } from '@tessera/protocol';
import { ShardIdentityService } from '../identity/shard-identity.service.js';

/**
 * Who decided: the coordinator after two-phase commit, the coordinator presuming abort for a
 * transaction it has no record of, the only participant committing on its own, a participant
 * whose statement failed, a router's abortTransaction, the reaper, or an operator.
 */
export type DecidedBy = 'coordinator' | 'presumedAbort' | 'participant' | 'router' | 'reaper' | 'operator';

/** One decision as the changelog keeps it. */
export interface TransactionDecisionRecord {
  lsid: string;
  txnNumber: number;
  decision: 'commit' | 'abort';
  by: DecidedBy;
  /** ISO time the decision was taken here. */
  at: string;
  commitTime?: ClusterTimestamp;
  /** The participants a coordinator decided for. */
  participants?: string[];
  reason?: string;
}

/** Decisions per changelog row: a row stays within one NOTIFY, and a busy shard within a few rows a second. */
export const DECISIONS_PER_ROW = 100;
/** How often the decisions taken meanwhile go to the config server. */
const FLUSH_MS = 500;
/** Decisions kept while the config server does not answer; beyond that the oldest are dropped and counted. */
const MAX_BUFFERED = 10_000;

/**
 * Sends every transaction decision this shard takes to the config server's changelog, as
 * `transaction.decisions` rows (topic `transactions`) of up to `DECISIONS_PER_ROW` decisions
 * each, every `FLUSH_MS`: one row per decision would flood the capped changelog (pushing
 * placement history out) at a few hundred transactions a second. Reporting never holds a
 * transaction up; what cannot be delivered waits for the next flush, up to `MAX_BUFFERED`.
 */
@Injectable()
export class TransactionReporter implements OnApplicationBootstrap, OnApplicationShutdown {
  private buffer: TransactionDecisionRecord[] = [];
  private dropped = 0;
  private loop: Periodic | undefined;

  constructor(
    private readonly identity: ShardIdentityService,
    private readonly clients: InternalClients,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  onApplicationBootstrap(): void {
    this.loop = runPeriodically(
      () => this.flush(),
      FLUSH_MS,
      (error) => this.logger.warn({ err: error }, `could not report transaction decisions: ${(error as Error).message}`),
    );
  }

  async onApplicationShutdown(): Promise<void> {
    this.loop?.stop();
    await this.flush().catch(() => undefined);
  }

  /** Decisions not yet sent (for tests and status). */
  get unsent(): readonly TransactionDecisionRecord[] {
    return this.buffer;
  }

  decided(id: TransactionId, decision: 'commit' | 'abort', by: DecidedBy, extra: Partial<TransactionDecisionRecord> = {}): void {
    if (this.buffer.length >= MAX_BUFFERED) {
      this.buffer.shift();
      this.dropped++;
    }
    this.buffer.push({ lsid: id.lsid.id, txnNumber: id.txnNumber, decision, by, at: new Date().toISOString(), ...extra });
  }

  /** Sends what is buffered, a row at a time; a row the config server did not take is kept for the next flush. */
  async flush(): Promise<void> {
    if (this.buffer.length === 0) return;
    const identity = await this.identity.get();
    if (identity === null) return;
    const config = this.clients.config(identity.configUrl);
    while (this.buffer.length > 0) {
      const decisions = this.buffer.slice(0, DECISIONS_PER_ROW);
      const dropped = this.dropped;
      await config.reportChangelog({
        what: 'transaction.decisions',
        shard: identity.shardName,
        details: { decisions, count: decisions.length, ...(dropped > 0 ? { dropped } : {}) },
      });
      this.buffer.splice(0, decisions.length);
      this.dropped -= dropped;
    }
  }
}
