import { setTimeout as sleep } from 'node:timers/promises';
import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type { Logger } from 'pino';
import { DataSource, type EntityManager } from 'typeorm';
import { TesseraError, type ValueObject, encodeKey, fromExtendedJsonObject, isErrorCode, parseShardKeyPattern } from '@tessera/core';
import {
  type MigrationClient,
  type RecvChunkReleaseRequest,
  type RecvChunkStartRequest,
  type RecvChunkStatus,
  type TransferredDocument,
  chunkRangeFromWire,
  parseTransferLines,
  recvChunkReleaseRequestSchema,
  recvChunkStartRequestSchema,
} from '@tessera/protocol';
import { Failpoints, InternalClients, LOGGER, SETTINGS, parseWith, queryRows } from '@tessera/platform';
import { CollectionStorageService, tableName } from '../collections/collection-storage.service.js';
import { SecondaryIndexCatalog } from '../documents/index-catalog.js';
import { type SecondaryIndex, addEntries, entriesOf, indexesForWrite, removeStoredEntries } from '../documents/index-maintenance.js';
import type { ShardSettings } from '../shard.settings.js';
import { ShardingRuntime } from '../sharding/sharding-runtime.service.js';
import { type CopiedRow, copyRowsIn, parseCopyRows } from './copy-transfer.js';
import { MigrationMetrics } from './migration-metrics.js';
import { registerMigration, unregisterMigration } from './migration-registry.js';
import { MigrationReporter } from './migration-reporter.js';
import { RangeDeleterService } from './range-deleter.service.js';

interface Receipt {
  request: RecvChunkStartRequest;
  donor: MigrationClient;
  table: string;
  min: Buffer;
  max: Buffer;
  status: RecvChunkStatus;
  commitRequested: boolean;
  stopped: boolean;
  /** The clone and catch-up, from start to the end of the drain (or a failure). */
  work: Promise<void>;
  section?: { release(): void };
}

/** Captured writes asked for per catch-up round. */
const MODS_BATCH = 5_000;
/** Pause between catch-up rounds that found nothing. */
const IDLE_CATCHUP_MS = 10;
const PEER_TIMEOUT_MS = 120_000;

/**
 * The recipient side of a migration (MongoDB's MigrationDestinationManager): registers the
 * receipt, waits for overlapping range deletions, builds the collection and its indexes,
 * records its own pending range deletion (so that documents of an aborted migration are
 * cleaned up even after a crash), clones the range in batches (fetching the next batch while
 * writing the last), then applies the donor's captured writes until told to commit, when it
 * drains them and holds its critical section until the decision comes.
 */
@Injectable()
export class MigrationDestinationService implements OnApplicationBootstrap, OnApplicationShutdown {
  private receipt: Receipt | undefined;
  private readonly indexes: SecondaryIndexCatalog;

  constructor(
    private readonly dataSource: DataSource,
    private readonly storage: CollectionStorageService,
    private readonly runtime: ShardingRuntime,
    private readonly rangeDeleter: RangeDeleterService,
    private readonly reporter: MigrationReporter,
    private readonly metrics: MigrationMetrics,
    private readonly clients: InternalClients,
    private readonly failpoints: Failpoints,
    @Inject(SETTINGS) private readonly settings: ShardSettings,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {
    this.indexes = new SecondaryIndexCatalog(dataSource);
  }

  /** A registration without its receipt document is a crash between the two: drop it. */
  async onApplicationBootstrap(): Promise<void> {
    await this.dataSource.query(
      `DELETE FROM migration_registry WHERE role = 'recipient' AND migration_id NOT IN (SELECT id FROM migration_recipients)`,
    );
  }

  async onApplicationShutdown(): Promise<void> {
    if (this.receipt !== undefined) this.receipt.stopped = true;
  }

  /** MongoDB's `_recvChunkStart`: registers the receipt and starts cloning in the background. */
  async recvChunkStart(input: RecvChunkStartRequest): Promise<RecvChunkStatus> {
    const request = parseWith(recvChunkStartRequestSchema, input, 'recvChunkStart request');
    if (this.receipt?.request.migrationId === request.migrationId) return this.receipt.status;
    const range = chunkRangeFromWire(request.range);
    const min = Buffer.from(encodeKey(range.min));
    const max = Buffer.from(encodeKey(range.max));
    await this.dataSource.transaction(async (manager) => {
      await registerMigration(manager, {
        migrationId: request.migrationId,
        role: 'recipient',
        ns: request.ns,
        minEjson: JSON.stringify(request.range.min),
        maxEjson: JSON.stringify(request.range.max),
        otherShard: request.donor,
      });
      await manager.query(
        `INSERT INTO migration_recipients (id, ns, collection_uuid, min, max, donor, donor_url) VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (id) DO NOTHING`,
        [request.migrationId, request.ns, request.collectionUuid, min, max, request.donor, request.donorUrl],
      );
    });
    const receipt: Receipt = {
      request,
      donor: this.clients.migration(request.donorUrl, PEER_TIMEOUT_MS),
      table: tableName(request.collectionUuid),
      min,
      max,
      status: { migrationId: request.migrationId, state: 'waitingForRangeDeletion', documentsCloned: 0, bytesCloned: 0, modsApplied: 0 },
      commitRequested: false,
      stopped: false,
      work: Promise.resolve(),
    };
    this.receipt = receipt;
    receipt.work = this.receive(receipt).catch((error: unknown) => {
      receipt.status.state = 'failed';
      receipt.status.error = { code: error instanceof TesseraError ? error.code : 'INTERNAL', message: (error as Error).message };
      this.logger.warn({ err: error, migrationId: request.migrationId }, `receiving migration ${request.migrationId} failed: ${(error as Error).message}`);
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
      error: { code: 'NOT_FOUND', message: 'the recipient is not receiving this migration (it ended, or the recipient restarted)' },
    };
  }

  /**
   * MongoDB's `_recvChunkCommit`: with the donor's writes stopped, applies the last captured
   * writes, then takes this side's critical section until the decision arrives.
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
    receipt.status.state = 'committing';
    return receipt.status;
  }

  /**
   * The decision, from the donor: committed, this side keeps the documents (its range deletion
   * is forgotten) and reloads its metadata; aborted, its range deletion becomes ready at once.
   * Either way the receipt ends. Idempotent; works from the persisted receipt after a restart.
   */
  async recvChunkRelease(input: RecvChunkReleaseRequest): Promise<{ released: boolean }> {
    const request = parseWith(recvChunkReleaseRequestSchema, input, 'recvChunkRelease request');
    const receipt = this.receipt?.request.migrationId === request.migrationId ? this.receipt : undefined;
    if (receipt !== undefined) {
      receipt.stopped = true;
      await receipt.work;
    }
    const rows: Array<{ ns: string }> = await this.dataSource.query('SELECT ns FROM migration_recipients WHERE id = $1', [request.migrationId]);
    const ns = rows[0]?.ns ?? receipt?.request.ns;
    await this.dataSource.transaction(async (manager) => {
      if (request.decision === 'committed') await this.rangeDeleter.remove(manager, request.migrationId);
      else await this.rangeDeleter.markReady(manager, request.migrationId, 0);
      await manager.query('DELETE FROM migration_recipients WHERE id = $1', [request.migrationId]);
      await unregisterMigration(manager, request.migrationId);
    });
    if (request.decision === 'committed' && ns !== undefined) {
      const state = await this.runtime.state();
      state.invalidate(ns);
    }
    receipt?.section?.release();
    if (receipt !== undefined) {
      receipt.status.state = request.decision === 'committed' ? 'done' : 'failed';
      if (this.receipt === receipt) this.receipt = undefined;
      this.reporter.report({
        what: 'moveChunk.to',
        ns: receipt.request.ns,
        details: {
          migrationId: request.migrationId,
          decision: request.decision,
          from: receipt.request.donor,
          documentsCloned: receipt.status.documentsCloned,
          bytesCloned: receipt.status.bytesCloned,
          modsApplied: receipt.status.modsApplied,
        },
      });
    }
    if (request.decision === 'aborted') this.rangeDeleter.poke();
    return { released: rows.length > 0 };
  }

  private async receive(receipt: Receipt): Promise<void> {
    const { request } = receipt;
    await this.rangeDeleter.waitForOverlapping(request.collectionUuid, receipt.min, receipt.max);
    const local = await this.storage.localCollection(request.ns);
    if (local !== undefined && local.uuid !== request.collectionUuid) {
      throw new TesseraError('CONFLICTING_OPERATION', `this shard holds another collection under ${request.ns} (uuid ${local.uuid})`, {
        details: { ns: request.ns },
      });
    }
    if (local === undefined) await this.storage.createCollection(request.collectionUuid, { ns: request.ns, keyPattern: request.keyPattern });
    if (request.indexes.length > 0) {
      await this.indexes.create(
        { uuid: request.collectionUuid, table: receipt.table, ns: request.ns, shardKey: parseShardKeyPattern(request.keyPattern), sharded: true },
        request.indexes,
      );
    }
    await this.dataSource.transaction((manager) =>
      this.rangeDeleter.recordPending(manager, {
        id: request.migrationId,
        ns: request.ns,
        collectionUuid: request.collectionUuid,
        min: receipt.min,
        max: receipt.max,
        minEjson: JSON.stringify(request.range.min),
        maxEjson: JSON.stringify(request.range.max),
      }),
    );

    receipt.status.state = 'cloning';
    const limit = this.settings.TESSERA_MIGRATION_CLONE_BATCH_DOCUMENTS;
    const fetch = (after?: CopiedRow) =>
      receipt.donor
        .migrateClone({ migrationId: request.migrationId, limit, ...(after ? { after: { key: after.key, id: after.id } } : {}) })
        .then((text) => ({ text, rows: parseCopyRows(text) }));
    let next: Promise<{ text: string; rows: CopiedRow[] }> | undefined = fetch();
    while (next !== undefined) {
      const batch: { text: string; rows: CopiedRow[] } = await next;
      this.checkStopped(receipt);
      next = batch.rows.length === limit ? fetch(batch.rows[batch.rows.length - 1]) : undefined;
      next?.catch(() => undefined);
      await this.applyClone(receipt, batch.text, batch.rows);
      let bytes = 0;
      for (const row of batch.rows) bytes += row.size;
      receipt.status.documentsCloned += batch.rows.length;
      receipt.status.bytesCloned += bytes;
      this.metrics.documentsCloned.inc(batch.rows.length);
      this.metrics.bytesCloned.inc(bytes);
      if (receipt.status.documentsCloned === batch.rows.length) await this.failpoints.pauseAt('migration.recipient.firstCloneBatch', request.ns);
    }

    receipt.status.state = 'catchup';
    for (;;) {
      this.checkStopped(receipt);
      const draining = receipt.commitRequested;
      const text = await receipt.donor.transferMods({ migrationId: request.migrationId, limit: MODS_BATCH });
      const newline = text.indexOf('\n');
      const captured = text === '' ? 0 : Number(text.slice(0, newline));
      const mods = text === '' ? [] : parseTransferLines(text.slice(newline + 1));
      await this.applyMods(receipt, mods);
      receipt.status.modsApplied += mods.length;
      if (captured < MODS_BATCH && receipt.status.state === 'catchup') receipt.status.state = 'steady';
      if (draining && captured === 0) return;
      if (captured === 0) await sleep(IDLE_CATCHUP_MS);
    }
  }

  private checkStopped(receipt: Receipt): void {
    if (receipt.stopped) throw new TesseraError('CONFLICTING_OPERATION', `migration ${receipt.request.migrationId} was stopped`);
  }

  /** Writes a cloned batch (new documents here) with COPY, and their secondary index entries, in one transaction. */
  private async applyClone(receipt: Receipt, text: string, rows: CopiedRow[]): Promise<void> {
    if (rows.length === 0) return;
    const ns = receipt.request.ns;
    const runner = this.dataSource.createQueryRunner();
    await runner.connect();
    await runner.startTransaction();
    try {
      const indexes = await indexesForWrite(runner.manager, { table: receipt.table });
      await copyRowsIn(runner, receipt.table, text, ns);
      await this.addIndexEntries(runner.manager, ns, indexes, rows);
      await runner.commitTransaction();
    } catch (error) {
      await runner.rollbackTransaction();
      throw error;
    } finally {
      await runner.release();
    }
  }

  /**
   * Applies captured writes in one transaction, secondary indexes included: each document is
   * replaced by its current version or deleted. An `_id` that exists here outside the range
   * fails the migration with `DUPLICATE_KEY`: `_id` is unique per shard.
   */
  private async applyMods(receipt: Receipt, documents: TransferredDocument[]): Promise<void> {
    if (documents.length === 0) return;
    const { table, min, max } = receipt;
    const ns = receipt.request.ns;
    await this.dataSource.transaction(async (manager) => {
      const indexes = await indexesForWrite(manager, { table });
      const removed = await queryRows<{ id: Buffer; doc?: unknown }>(
        manager,
        `DELETE FROM ${table} WHERE id = ANY($1) AND shard_key >= $2 AND shard_key < $3 RETURNING id${indexes.length > 0 ? ', doc' : ''}`,
        [documents.map((d) => Buffer.from(d.id, 'hex')), min, max],
      );
      await removeStoredEntries(manager, indexes, removed);
      const upserts = documents.filter((d) => d.op === 'u');
      if (upserts.length === 0) return;
      const inserted: unknown[] = await manager.query(
        `INSERT INTO ${table} (id, shard_key, doc, size)
         SELECT decode(i, 'hex'), decode(k, 'hex'), d::json, s FROM unnest($1::text[], $2::text[], $3::text[], $4::int[]) AS u(i, k, d, s)
         ON CONFLICT (id) DO NOTHING RETURNING 1`,
        [upserts.map((d) => d.id), upserts.map((d) => d.key), upserts.map((d) => d.doc), upserts.map((d) => d.size)],
      );
      if (inserted.length < upserts.length) {
        throw new TesseraError('DUPLICATE_KEY', `a document of the incoming range of ${ns} has an _id that this shard already holds in another range`, {
          details: { ns },
        });
      }
      await this.addIndexEntries(manager, ns, indexes, upserts);
    });
  }

  private async addIndexEntries(manager: EntityManager, ns: string, indexes: readonly SecondaryIndex[], rows: ReadonlyArray<{ id: string; doc: string }>) {
    if (indexes.length === 0) return;
    const entries = rows.map((d) => entriesOf(indexes, Buffer.from(d.id, 'hex'), fromExtendedJsonObject(JSON.parse(d.doc)) as ValueObject));
    const conflicts = await addEntries(manager, ns, indexes, entries);
    const first = conflicts.values().next();
    if (!first.done) throw first.value;
  }

}

/**
 * The error of a receipt that failed, with the code of what failed it: a donor killed mid-clone
 * fails the receipt with HOST_UNREACHABLE, which is neither the recipient's fault nor INTERNAL.
 */
export function recipientFailure(error: { code: string; message: string } | undefined): TesseraError {
  const code = isErrorCode(error?.code) ? error.code : 'INTERNAL';
  return new TesseraError(code, `the recipient failed: ${error?.message ?? 'unknown error'}`, { details: { recipientError: error } });
}
