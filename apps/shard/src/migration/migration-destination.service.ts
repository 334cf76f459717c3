import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type { Logger } from 'pino';
import { TesseraError, encodeKey, recipientPhaseMachine } from '@tessera/core';
import {
  type MigrationDecision,
  type RecvChunkPacingRequest,
  type RecvChunkReleaseRequest,
  type RecvChunkStartRequest,
  type RecvChunkStatus,
  chunkRangeFromWire,
  recvChunkPacingRequestSchema,
  recvChunkReleaseRequestSchema,
  recvChunkStartRequestSchema,
} from '@tessera/protocol';
import { LOGGER, parseWith } from '@tessera/platform';
import { tableName } from '../collections/collection-storage.service.js';
import { ShardingRuntime } from '../sharding/sharding-runtime.service.js';
import { MigrationPeers } from './migration-peers.js';
import { MigrationRecipientCloner, type Receipt, moveReceipt } from './migration-recipient-cloner.js';
import { MigrationRecipientStore } from './migration-recipient.store.js';
import { MigrationReporter } from './migration-reporter.js';
import { RangeDeleterService } from './range-deleter.service.js';
import { recipientFailure } from './recipient-failure.js';

/**
 * The recipient side of a migration (MongoDB's MigrationDestinationManager), one method per
 * phase the donor drives: start (register the receipt and start receiving in the background, see
 * MigrationRecipientCloner), status, commit (drain and take this side's critical section) and
 * release (end by the decision). The receipt's state moves along `recipientPhaseMachine`.
 */
@Injectable()
export class MigrationDestinationService implements OnApplicationBootstrap, OnApplicationShutdown {
  private receipt: Receipt | undefined;

  constructor(
    private readonly store: MigrationRecipientStore,
    private readonly cloner: MigrationRecipientCloner,
    private readonly runtime: ShardingRuntime,
    private readonly rangeDeleter: RangeDeleterService,
    private readonly reporter: MigrationReporter,
    private readonly peers: MigrationPeers,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  /** A registration without its receipt document is a crash between the two: drop it. */
  async onApplicationBootstrap(): Promise<void> {
    await this.store.dropRegistrationsWithoutReceipt();
  }

  async onApplicationShutdown(): Promise<void> {
    if (this.receipt !== undefined) this.receipt.stopped = true;
  }

  /**
   * MongoDB's `_recvChunkStart`: registers the receipt (persisted with its registration) and
   * starts receiving in the background; the receipt starts in waitingForRangeDeletion and ends
   * in failed if the work fails. The same migration again answers its status.
   */
  async recvChunkStart(input: RecvChunkStartRequest): Promise<RecvChunkStatus> {
    const request = parseWith(recvChunkStartRequestSchema, input, 'recvChunkStart request');
    if (this.receipt?.request.migrationId === request.migrationId) return this.receipt.status;
    const range = chunkRangeFromWire(request.range);
    const min = Buffer.from(encodeKey(range.min));
    const max = Buffer.from(encodeKey(range.max));
    await this.store.create(
      {
        migrationId: request.migrationId,
        role: 'recipient',
        ns: request.ns,
        minEjson: JSON.stringify(request.range.min),
        maxEjson: JSON.stringify(request.range.max),
        otherShard: request.donor,
      },
      { collectionUuid: request.collectionUuid, min, max, donorUrl: request.donorUrl },
    );
    const receipt: Receipt = {
      request,
      ...(request.clonePacing === undefined ? {} : { pacing: request.clonePacing }),
      donor: this.peers.shard(request.donorUrl),
      range: { ns: request.ns, table: tableName(request.collectionUuid), min, max },
      status: {
        migrationId: request.migrationId,
        state: recipientPhaseMachine.initial,
        documentsCloned: 0,
        bytesCloned: 0,
        modsApplied: 0,
        sessionsMigrated: 0,
        clonePausedMs: 0,
      },
      commitRequested: false,
      stopped: false,
      work: Promise.resolve(),
    };
    this.receipt = receipt;
    receipt.work = this.cloner.receive(receipt).catch((error: unknown) => {
      moveReceipt(receipt, 'failed');
      receipt.status.error = { code: error instanceof TesseraError ? error.code : 'INTERNAL', message: (error as Error).message };
      this.logger.warn(
        { err: error, migrationId: request.migrationId },
        `receiving migration ${request.migrationId} failed: ${(error as Error).message}`,
      );
    });
    return receipt.status;
  }

  /** MongoDB's `_recvChunkStatus`. A migration this process does not know (it restarted) has failed. */
  recvChunkStatus(migrationId: string): RecvChunkStatus {
    if (this.receipt?.request.migrationId === migrationId) return this.receipt.status;
    return {
      migrationId,
      state: 'failed',
      documentsCloned: 0,
      bytesCloned: 0,
      modsApplied: 0,
      sessionsMigrated: 0,
      clonePausedMs: 0,
      error: { code: 'NOT_FOUND', message: 'the recipient is not receiving this migration (it ended, or the recipient restarted)' },
    };
  }

  /**
   * The throttle's new pacing for the rest of the clone (`RecvChunkPacingRequest`); answers
   * whether this migration is being received here.
   */
  recvChunkPacing(input: RecvChunkPacingRequest): { applied: boolean } {
    const request = parseWith(recvChunkPacingRequestSchema, input, 'recvChunkPacing request');
    const receipt = this.receipt;
    if (receipt?.request.migrationId !== request.migrationId) return { applied: false };
    receipt.pacing = request.clonePacing ?? undefined;
    return { applied: true };
  }

  /**
   * MongoDB's `_recvChunkCommit`, steady → committing: with the donor's writes stopped, applies
   * the last captured writes, then takes this side's critical section until the decision arrives.
   */
  async recvChunkCommit(migrationId: string): Promise<RecvChunkStatus> {
    const receipt = this.receipt;
    if (receipt?.request.migrationId !== migrationId) {
      throw new TesseraError('NOT_FOUND', `the recipient is not receiving migration ${migrationId}`, { details: { migrationId } });
    }
    receipt.commitRequested = true;
    await receipt.work;
    if (receipt.status.state === 'failed') {
      throw recipientFailure(receipt.status.error);
    }
    receipt.section ??= await this.runtime.enterCriticalSection(receipt.request.ns, `receiving migration ${migrationId}`);
    moveReceipt(receipt, 'committing');
    return receipt.status;
  }

  /**
   * The decision, from the donor (committing → done, or → failed): committed, this side keeps
   * the documents (its range deletion is forgotten) and reloads its metadata; aborted, its range
   * deletion becomes ready at once. Either way the receipt ends. Idempotent; works from the
   * persisted receipt after a restart.
   */
  async recvChunkRelease(input: RecvChunkReleaseRequest): Promise<{ released: boolean }> {
    const request = parseWith(recvChunkReleaseRequestSchema, input, 'recvChunkRelease request');
    const receipt = this.receipt?.request.migrationId === request.migrationId ? this.receipt : undefined;
    if (receipt !== undefined) {
      receipt.stopped = true;
      await receipt.work;
    }
    const persistedNs = await this.store.nsOf(request.migrationId);
    const ns = persistedNs ?? receipt?.request.ns;
    await this.store.complete(request.migrationId, request.decision);
    if (request.decision === 'committed' && ns !== undefined) {
      const state = await this.runtime.state();
      state.invalidate(ns);
    }
    receipt?.section?.release();
    if (receipt !== undefined) this.endReceipt(receipt, request.decision);
    if (request.decision === 'aborted') this.rangeDeleter.poke();
    return { released: persistedNs !== undefined };
  }

  private endReceipt(receipt: Receipt, decision: MigrationDecision): void {
    moveReceipt(receipt, decision === 'committed' ? 'done' : 'failed');
    if (this.receipt === receipt) this.receipt = undefined;
    this.reporter.report({
      what: 'moveChunk.to',
      ns: receipt.request.ns,
      details: {
        migrationId: receipt.request.migrationId,
        decision,
        from: receipt.request.donor,
        documentsCloned: receipt.status.documentsCloned,
        bytesCloned: receipt.status.bytesCloned,
        modsApplied: receipt.status.modsApplied,
        sessionsMigrated: receipt.status.sessionsMigrated,
      },
    });
  }
}
