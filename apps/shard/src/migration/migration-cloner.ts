import { setTimeout as sleep } from 'node:timers/promises';
import { Inject, Injectable, type OnApplicationShutdown } from '@nestjs/common';
import type { Logger } from 'pino';
import { DataSource } from 'typeorm';
import { TesseraError } from '@tessera/core';
import {
  type DonorMoveRangeRequest,
  type MigrateCloneRequest,
  type RecvChunkStatus,
  type SessionHistoryBatch,
  type SessionHistoryRequest,
  type TransferModsRequest,
  deletionLine,
  documentLine,
  migrateCloneRequestSchema,
  sessionHistoryRequestSchema,
  transferModsRequestSchema,
} from '@tessera/protocol';
import { LOGGER, SETTINGS, advertisedUrl, parseWith } from '@tessera/platform';
import { loadIndexes } from '../documents/index-maintenance.js';
import { SessionRecords } from '../sessions/session-records.service.js';
import type { ShardSettings } from '../shard.settings.js';
import { CaptureTriggers } from './capture-triggers.js';
import { copyRangeOut } from './copy-transfer.js';
import type { DonorPlan } from './donor-preconditions.js';
import { recipientFailure } from './recipient-failure.js';
import { MigrationModsStore } from './migration-mods.store.js';
import { MigrationPeers } from './migration-peers.js';

/** A range this shard is donating: what its clone and catch-up routes serve. */
interface Donation {
  collectionUuid: string;
  table: string;
  min: Buffer;
  max: Buffer;
}

/** How often the donor asks the recipient how far it is. */
const STATUS_POLL_MS = 25;

/**
 * The donor's cloner (MongoDB's MigrationChunkClonerSource): captures the writes to a donated
 * range, starts the recipient, serves its clone (`migrateClone`), catch-up (`transferMods`) and
 * the range's retry history (`sessionHistory`),
 * polls it until it reaches steady state and has it commit the clone. Serving ends with the
 * donation; the capture trigger is dropped without stalling the collection (see CaptureTriggers).
 */
@Injectable()
export class MigrationCloner implements OnApplicationShutdown {
  private readonly donations = new Map<string, Donation>();
  private readonly captures: CaptureTriggers;
  private stopped = false;

  constructor(
    private readonly dataSource: DataSource,
    private readonly mods: MigrationModsStore,
    private readonly sessionRecords: SessionRecords,
    private readonly peers: MigrationPeers,
    @Inject(SETTINGS) private readonly settings: ShardSettings,
    @Inject(LOGGER) logger: Logger,
  ) {
    this.captures = new CaptureTriggers(dataSource, logger);
  }

  onApplicationShutdown(): void {
    this.stopped = true;
    this.captures.stop();
  }

  /** Whether the shard is shutting down (work that waits on peers stops). */
  get isStopped(): boolean {
    return this.stopped;
  }

  /**
   * Captures writes to the range before the first document is read, so none is missed; then
   * sends `recvChunkStart` with the collection's secondary indexes.
   */
  async startClone(request: DonorMoveRangeRequest, plan: DonorPlan): Promise<void> {
    await this.captures.create(request.migrationId, plan.table, plan.min, plan.max);
    this.donations.set(request.migrationId, { collectionUuid: plan.collectionUuid, table: plan.table, min: plan.min, max: plan.max });
    const indexes = await loadIndexes(this.dataSource.manager, plan.table);
    await this.peers.shard(request.recipientUrl).recvChunkStart({
      migrationId: request.migrationId,
      ns: request.ns,
      collectionUuid: plan.collectionUuid,
      keyPattern: plan.keyPattern,
      range: request.range,
      donor: plan.shard,
      donorUrl: advertisedUrl(this.settings),
      indexes: indexes.map((i) => ({ key: i.keyPattern, name: i.name, ...(i.unique ? { unique: true } : {}) })),
      ...(request.clonePacing === undefined ? {} : { clonePacing: request.clonePacing }),
    });
  }

  /** Polls the recipient until it reports steady state; `onStatus` sees every other answer. Throws its failure. */
  async awaitSteadyState(request: DonorMoveRangeRequest, onStatus: (status: RecvChunkStatus) => void): Promise<RecvChunkStatus> {
    const recipient = this.peers.shard(request.recipientUrl);
    for (;;) {
      if (this.stopped) throw new TesseraError('SHUTDOWN_IN_PROGRESS', 'the donor is shutting down');
      const status = await recipient.recvChunkStatus(request.migrationId);
      if (status.state === 'failed') throw recipientFailure(status.error);
      if (status.state === 'steady') return status;
      onStatus(status);
      await sleep(STATUS_POLL_MS);
    }
  }

  /** `recvChunkCommit`: the recipient drains the last captured writes and takes its critical section. */
  commitClone(request: DonorMoveRangeRequest): Promise<RecvChunkStatus> {
    return this.peers.shard(request.recipientUrl).recvChunkCommit(request.migrationId);
  }

  /** The next documents of the range in (shard key, _id) order, as COPY text (MongoDB's `_migrateClone`; see copy-transfer.ts). */
  async migrateClone(input: MigrateCloneRequest): Promise<string> {
    const request = parseWith(migrateCloneRequestSchema, input, 'migrateClone request');
    const donation = this.donation(request.migrationId);
    const after = request.after && { key: Buffer.from(request.after.key, 'hex'), id: Buffer.from(request.after.id, 'hex') };
    return copyRangeOut(this.dataSource, donation.table, donation, after, request.limit);
  }

  /**
   * The documents written in the range since the last call (MongoDB's `_transferMods`): each
   * captured `_id` once, as its current version when it is still in the range, else as a
   * deletion. Answers at most `limit` captured writes; fewer means the backlog is empty.
   */
  async transferMods(input: TransferModsRequest): Promise<string> {
    const request = parseWith(transferModsRequestSchema, input, 'transferMods request');
    const donation = this.donation(request.migrationId);
    const captured = await this.mods.take(request.migrationId, request.limit);
    if (captured.length === 0) return '';
    const ids = [...new Map(captured.map((id) => [id.toString('hex'), id])).values()];
    const rows = await this.mods.currentVersions(donation.table, ids, donation.min, donation.max);
    const current = new Map(rows.filter((r) => r.inside).map((r) => [r.i, r]));
    let text = '';
    for (const id of ids) {
      const hex = id.toString('hex');
      const row = current.get(hex);
      text += row === undefined ? deletionLine(hex) : documentLine(row.i, row.k, row.size, row.d);
    }
    // One line per distinct _id; the caller compares the captured count with its limit.
    return `${captured.length}\n${text}`;
  }

  /**
   * A page of the retry history of the range's documents (MongoDB's `_getNextSessionMods`): the
   * sessions after `afterLsid` with their current txnNumber's statements in the range. Read
   * whole each time: the recipient asks again inside the critical section, when no write to the
   * range can add to it.
   */
  async sessionHistory(input: SessionHistoryRequest): Promise<SessionHistoryBatch> {
    const request = parseWith(sessionHistoryRequestSchema, input, 'sessionHistory request');
    const donation = this.donation(request.migrationId);
    const sessions = await this.sessionRecords.historyInRange(donation, request.afterLsid, request.limit);
    return { sessions };
  }

  /** Stops serving the donation: its clone and catch-up routes answer `NOT_FOUND` from now on. */
  endDonation(migrationId: string): void {
    this.donations.delete(migrationId);
  }

  /** Drops the donation's capture trigger and captured writes, now or, if the table is busy, soon. */
  dropCapture(migrationId: string, table: string): Promise<void> {
    return this.captures.drop(migrationId, table);
  }

  /** Drops capture triggers and captured writes no running donation owns (leftovers of a crash). */
  dropStrayCaptures(): Promise<void> {
    return this.captures.dropStray([...this.donations.keys()]);
  }

  private donation(migrationId: string): Donation {
    const donation = this.donations.get(migrationId);
    if (donation === undefined) {
      throw new TesseraError('NOT_FOUND', `this shard is not donating migration ${migrationId} (it ended or the shard restarted)`, {
        details: { migrationId },
      });
    }
    return donation;
  }
}
