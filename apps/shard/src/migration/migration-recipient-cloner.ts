import { setTimeout as sleep } from 'node:timers/promises';
import { Inject, Injectable } from '@nestjs/common';
import { type RecipientPhase, TesseraError, recipientPhaseMachine } from '@tessera/core';
import {
  type ClonePacing,
  type MigrationClient,
  type RecvChunkStartRequest,
  type RecvChunkStatus,
  parseTransferLines,
} from '@tessera/protocol';
import { Failpoints, SETTINGS } from '@tessera/platform';
import { CollectionStorageService } from '../collections/collection-storage.service.js';
import type { ShardSettings } from '../shard.settings.js';
import { type CopiedRow, parseCopyRows } from './copy-transfer.js';
import { type IncomingRange, IncomingRangeStore } from './incoming-range.store.js';
import { IncomingSessionHistory } from './incoming-session-history.js';
import { MigrationMetrics } from './migration-metrics.js';
import { RangeDeleterService } from './range-deleter.service.js';
import { RangeDeletionStore } from './range-deletion.store.js';
import { WriteTimes } from '../history/write-times.service.js';

/** A migration this shard receives, while it runs. */
export interface Receipt {
  request: RecvChunkStartRequest;
  /** How the clone is paced now: the request's, then the throttle's (`recvChunkPacing`); none at full speed. */
  pacing?: ClonePacing;
  donor: MigrationClient;
  range: IncomingRange;
  /** What `recvChunkStatus` answers; its state moves along `recipientPhaseMachine`. */
  status: RecvChunkStatus;
  commitRequested: boolean;
  stopped: boolean;
  /** The clone and catch-up, from start to the end of the drain (or a failure). */
  work: Promise<void>;
  section?: { release(): void };
}

/** Moves the receipt's state along the recipient's machine (a move to the same state is none). */
export function moveReceipt(receipt: Receipt, next: RecipientPhase): void {
  if (receipt.status.state !== next) receipt.status.state = recipientPhaseMachine.move(receipt.status.state, next);
}

/** Captured writes asked for per catch-up round. */
const MODS_BATCH = 5_000;
/** Pause between catch-up rounds that found nothing. */
const IDLE_CATCHUP_MS = 10;

/**
 * The recipient's background work (MongoDB's MigrationDestinationManager migrate thread):
 * prepares the range, clones it in batches (fetching the next batch while writing the last),
 * pulls the range's retry history, then applies the donor's captured writes until told to
 * commit, when it drains them and pulls the retry history once more.
 */
@Injectable()
export class MigrationRecipientCloner {
  constructor(
    private readonly storage: CollectionStorageService,
    private readonly rangeDeleter: RangeDeleterService,
    private readonly rangeDeletions: RangeDeletionStore,
    private readonly incoming: IncomingRangeStore,
    private readonly sessionHistory: IncomingSessionHistory,
    private readonly metrics: MigrationMetrics,
    private readonly failpoints: Failpoints,
    private readonly writeTimes: WriteTimes,
    @Inject(SETTINGS) private readonly settings: ShardSettings,
  ) {}

  /** waitingForRangeDeletion → cloning → catchup → steady, and drained once commit is requested. */
  async receive(receipt: Receipt): Promise<void> {
    await this.prepare(receipt);
    moveReceipt(receipt, 'cloning');
    await this.clone(receipt);
    await this.migrateSessions(receipt);
    moveReceipt(receipt, 'catchup');
    await this.catchUp(receipt);
    await this.migrateSessions(receipt);
  }

  /**
   * In waitingForRangeDeletion: waits for overlapping range deletions, builds the collection and
   * the donor's indexes, and records this side's pending range deletion, so that the documents
   * of an aborted migration are cleaned up even after a crash.
   */
  private async prepare(receipt: Receipt): Promise<void> {
    const { request, range } = receipt;
    await this.rangeDeleter.waitForOverlapping(request.collectionUuid, range.min, range.max);
    const local = await this.storage.localCollection(request.ns);
    if (local !== undefined && local.uuid !== request.collectionUuid) {
      throw new TesseraError('CONFLICTING_OPERATION', `this shard holds another collection under ${request.ns} (uuid ${local.uuid})`, {
        details: { ns: request.ns },
      });
    }
    if (local === undefined)
      await this.storage.createCollection(request.collectionUuid, { ns: request.ns, keyPattern: request.keyPattern });
    await this.incoming.createIndexes(request, range.table);
    await this.rangeDeletions.recordPending({
      id: request.migrationId,
      ns: request.ns,
      collectionUuid: request.collectionUuid,
      min: range.min,
      max: range.max,
      minEjson: JSON.stringify(request.range.min),
      maxEjson: JSON.stringify(request.range.max),
    });
  }

  /**
   * In cloning: pulls the range in batches (`migrateClone`) until a batch comes back short,
   * fetching the next batch while writing the last. While the receipt is paced (the balancer's
   * load throttle, at the start or since), batches of its size, each fetched after the last was
   * written and a wait of `waitRatio` times as long as that batch took.
   */
  private async clone(receipt: Receipt): Promise<void> {
    const { request, status } = receipt;
    let batchStarted = performance.now();
    const fetch = (after?: CopiedRow) => {
      const limit = receipt.pacing?.batchDocuments ?? this.settings.TESSERA_MIGRATION_CLONE_BATCH_DOCUMENTS;
      batchStarted = performance.now();
      return receipt.donor
        .migrateClone({ migrationId: request.migrationId, limit, ...(after ? { after: { key: after.key, id: after.id } } : {}) })
        .then((text) => ({ text, rows: parseCopyRows(text), limit }));
    };
    let next: Promise<{ text: string; rows: CopiedRow[]; limit: number }> | undefined = fetch();
    while (next !== undefined) {
      const batch: { text: string; rows: CopiedRow[]; limit: number } = await next;
      checkStopped(receipt);
      const last = batch.rows.length === batch.limit ? batch.rows[batch.rows.length - 1] : undefined;
      const started = batchStarted;
      next = last !== undefined && receipt.pacing === undefined ? fetch(last) : undefined;
      next?.catch(() => undefined);
      await this.writeTimes.run((writeTime) => this.incoming.applyClone(receipt.range, batch.text, batch.rows, writeTime));
      let bytes = 0;
      for (const row of batch.rows) bytes += row.size;
      status.documentsCloned += batch.rows.length;
      status.bytesCloned += bytes;
      this.metrics.documentsCloned.inc(batch.rows.length);
      this.metrics.bytesCloned.inc(bytes);
      if (status.documentsCloned === batch.rows.length) await this.failpoints.pauseAt('migration.recipient.firstCloneBatch', request.ns);
      if (last !== undefined && next === undefined) {
        const waitMs = Math.round((receipt.pacing?.waitRatio ?? 0) * (performance.now() - started));
        await sleep(waitMs);
        status.clonePausedMs += waitMs;
        checkStopped(receipt);
        next = fetch(last);
      }
    }
  }

  /**
   * Pulls and applies the retry history of the range's documents (session migration). Runs
   * after the clone, so that most of it moves before the critical section, and again after the
   * drain: the donor's writes are blocked then, so the history recorded since the first pull is
   * complete, and applying the history already applied changes nothing.
   */
  private async migrateSessions(receipt: Receipt): Promise<void> {
    const { request, status } = receipt;
    status.sessionsMigrated += await this.sessionHistory.receive(receipt.donor, request.migrationId, request.collectionUuid, () =>
      checkStopped(receipt),
    );
  }

  /**
   * In catchup: applies the captured writes (`transferMods`); steady once a round comes back
   * short. Returns when commit was requested and a round found nothing left (the donor's writes
   * are stopped by then, so none can follow).
   */
  private async catchUp(receipt: Receipt): Promise<void> {
    const { request, status } = receipt;
    for (;;) {
      checkStopped(receipt);
      const draining = receipt.commitRequested;
      const text = await receipt.donor.transferMods({ migrationId: request.migrationId, limit: MODS_BATCH });
      const newline = text.indexOf('\n');
      const captured = text === '' ? 0 : Number(text.slice(0, newline));
      const mods = text === '' ? [] : parseTransferLines(text.slice(newline + 1));
      await this.writeTimes.run((writeTime) => this.incoming.applyMods(receipt.range, mods, writeTime));
      status.modsApplied += mods.length;
      if (captured < MODS_BATCH && status.state === 'catchup') moveReceipt(receipt, 'steady');
      if (draining && captured === 0) return;
      if (captured === 0) await sleep(IDLE_CATCHUP_MS);
    }
  }
}

function checkStopped(receipt: Receipt): void {
  if (receipt.stopped) throw new TesseraError('CONFLICTING_OPERATION', `migration ${receipt.request.migrationId} was stopped`);
}
