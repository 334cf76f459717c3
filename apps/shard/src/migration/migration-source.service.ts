import { setTimeout as sleep } from 'node:timers/promises';
import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type { Logger } from 'pino';
import { DataSource } from 'typeorm';
import { IGNORED_VERSION, TesseraError, chunkRangeToString, encodeKey, rangesEqual } from '@tessera/core';
import {
  type DonorMoveRangeRequest,
  type MigrateCloneRequest,
  type MigrationDecision,
  type MigrationPhase,
  type MoveRangeResult,
  type RecvChunkStatus,
  type ShardMigrationStatus,
  type TransferModsRequest,
  chunkRangeFromWire,
  deletionLine,
  documentLine,
  donorMoveRangeRequestSchema,
  migrateCloneRequestSchema,
  transferModsRequestSchema,
} from '@tessera/protocol';
import { Failpoints, InternalClients, LOGGER, SETTINGS, advertisedUrl, parseWith, queryRows } from '@tessera/platform';
import { ChunkSizingService } from '../chunks/chunk-sizing.service.js';
import { CollectionStorageService, tableName } from '../collections/collection-storage.service.js';
import { loadIndexes } from '../documents/index-maintenance.js';
import { ShardIdentityService } from '../identity/shard-identity.service.js';
import type { ShardSettings } from '../shard.settings.js';
import { ShardingRuntime } from '../sharding/sharding-runtime.service.js';
import { copyRangeOut } from './copy-transfer.js';
import { CaptureTriggers } from './capture-triggers.js';
import { recipientFailure } from './migration-destination.service.js';
import { MigrationMetrics } from './migration-metrics.js';
import { registerMigration, registeredMigration, unregisterMigration } from './migration-registry.js';
import { MigrationReporter } from './migration-reporter.js';
import { RangeDeleterService } from './range-deleter.service.js';

/** A range this shard is donating: what its clone and catch-up routes serve. */
interface Donation {
  table: string;
  min: Buffer;
  max: Buffer;
}

interface CoordinatorRow {
  id: string;
  ns: string;
  collection_uuid: string;
  min: Buffer;
  max: Buffer;
  min_ejson: string;
  max_ejson: string;
  recipient: string;
  recipient_url: string;
  decision: MigrationDecision | null;
}

/** How often the donor asks the recipient how far it is. */
const STATUS_POLL_MS = 25;
/** How often cloning progress goes to the changelog. */
const PROGRESS_REPORT_MS = 1_000;
/** Requests between donor and recipient can wait on a whole batch or a drain. */
const PEER_TIMEOUT_MS = 120_000;

/**
 * The donor side of a migration (MongoDB's MigrationSourceManager, MigrationChunkClonerSource
 * and MigrationCoordinator): checks the preconditions, registers the donation, records the
 * coordinator document and its own pending range deletion, captures writes to the range,
 * starts the recipient and serves its clone and catch-up, waits for it to reach steady state,
 * takes the critical section (writes, then reads), has the recipient commit, commits on the
 * config server, records the decision and ends the migration on both sides. A restart finds
 * the coordinator documents and finishes each migration by its decision, asking the config
 * server when none was recorded.
 */
@Injectable()
export class MigrationSourceService implements OnApplicationBootstrap, OnApplicationShutdown {
  private running: { key: string; request: DonorMoveRangeRequest; result: Promise<MoveRangeResult>; since: string } | undefined;
  private readonly donations = new Map<string, Donation>();
  private recovery: Promise<void> | undefined;
  private stopped = false;
  /** Drops donations' capture triggers without stalling their collections (see CaptureTriggers). */
  private readonly captures: CaptureTriggers;

  constructor(
    private readonly dataSource: DataSource,
    private readonly identity: ShardIdentityService,
    private readonly storage: CollectionStorageService,
    private readonly sizing: ChunkSizingService,
    private readonly runtime: ShardingRuntime,
    private readonly rangeDeleter: RangeDeleterService,
    private readonly reporter: MigrationReporter,
    private readonly metrics: MigrationMetrics,
    private readonly clients: InternalClients,
    private readonly failpoints: Failpoints,
    @Inject(SETTINGS) private readonly settings: ShardSettings,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {
    this.captures = new CaptureTriggers(dataSource, logger);
  }

  /**
   * Before the shard serves anything: a migration found without a decision may have committed
   * on the config server, so its collection stays in the critical section until recovery learns
   * the decision; then every found migration is finished in the background.
   */
  async onApplicationBootstrap(): Promise<void> {
    const rows: CoordinatorRow[] = await this.dataSource.query('SELECT * FROM migration_coordinators ORDER BY created_at');
    const sections = new Map<string, { blockReads(): void; release(): void }>();
    for (const row of rows) {
      if (row.decision === null && !sections.has(row.ns)) {
        const section = await this.runtime.enterCriticalSection(row.ns, `recovery of migration ${row.id}`);
        section.blockReads();
        sections.set(row.ns, section);
      }
    }
    this.recovery = this.recover(rows, sections);
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopped = true;
    this.captures.stop();
  }

  /**
   * Runs a migration this shard donates, to its end; the same migration asked again (the config
   * server retrying) joins the running one. Throws `CONFLICTING_OPERATION` while another runs.
   */
  moveRange(input: DonorMoveRangeRequest): Promise<MoveRangeResult> {
    const request = parseWith(donorMoveRangeRequestSchema, input, 'moveRange request');
    const key = JSON.stringify([request.ns, request.range, request.recipient]);
    if (this.running !== undefined) {
      if (this.running.key === key) return this.running.result;
      const r = this.running.request;
      throw new TesseraError(
        'CONFLICTING_OPERATION',
        `this shard is already donating ${chunkRangeToString(chunkRangeFromWire(r.range))} of ${r.ns} to ${r.recipient}; a shard takes part in one migration at a time`,
        { details: { active: { migrationId: r.migrationId, ns: r.ns, recipient: r.recipient } } },
      );
    }
    const result = this.donate(request).finally(() => {
      if (this.running?.result === result) this.running = undefined;
    });
    this.running = { key, request, result, since: new Date().toISOString() };
    return result;
  }

  /**
   * The migration this shard takes part in: the registered one, else one it was asked to donate
   * and is still checking before it registers (the config server must not take it for gone).
   */
  async status(): Promise<ShardMigrationStatus> {
    const registered = await registeredMigration(this.dataSource.manager);
    const starting = this.running;
    const active =
      registered !== undefined
        ? { migrationId: registered.migrationId, role: registered.role, ns: registered.ns, otherShard: registered.otherShard, since: registered.since }
        : starting !== undefined
          ? { migrationId: starting.request.migrationId, role: 'donor' as const, ns: starting.request.ns, otherShard: starting.request.recipient, since: starting.since }
          : null;
    return { active, rangeDeletionsPending: await this.rangeDeleter.pendingCount() };
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
    const captured = await queryRows<{ id: Buffer }>(
      this.dataSource,
      `DELETE FROM migration_mods WHERE seq IN (SELECT seq FROM migration_mods WHERE migration_id = $1 ORDER BY seq LIMIT $2) RETURNING id`,
      [request.migrationId, request.limit],
    );
    if (captured.length === 0) return '';
    const ids = [...new Map(captured.map((c) => [c.id.toString('hex'), c.id])).values()];
    const rows: Array<{ i: string; k: string; size: number; d: string; inside: boolean }> = await this.dataSource.query(
      `SELECT encode(id, 'hex') AS i, encode(shard_key, 'hex') AS k, size, doc::text AS d, (shard_key >= $2 AND shard_key < $3) AS inside
       FROM ${donation.table} WHERE id = ANY($1)`,
      [ids, donation.min, donation.max],
    );
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

  private donation(migrationId: string): Donation {
    const donation = this.donations.get(migrationId);
    if (donation === undefined) {
      throw new TesseraError('NOT_FOUND', `this shard is not donating migration ${migrationId} (it ended or the shard restarted)`, {
        details: { migrationId },
      });
    }
    return donation;
  }

  private async donate(request: DonorMoveRangeRequest): Promise<MoveRangeResult> {
    const shard = (await this.identity.get())?.shardName;
    if (shard === undefined) throw new TesseraError('ILLEGAL_OPERATION', 'this shard has not been added to a cluster yet');
    await this.recovery;
    const phases: Array<{ phase: MigrationPhase; at: string }> = [];
    const report = (what: string, details: Record<string, unknown> = {}) =>
      this.reporter.report({
        what,
        ns: request.ns,
        details: { migrationId: request.migrationId, from: shard, to: request.recipient, min: request.range.min, max: request.range.max, ...details },
      });
    const mark = (phase: MigrationPhase, details: Record<string, unknown> = {}) => {
      const at = new Date().toISOString();
      phases.push({ phase, at });
      report('moveChunk.phase', { phase, at, ...details });
    };

    // Preconditions, against fresh metadata: the range is exactly one chunk this shard owns.
    const state = await this.runtime.state();
    state.invalidate(request.ns);
    const metadata = await state.checkShardVersion(request.ns, IGNORED_VERSION);
    const info = metadata.info;
    if (info.kind !== 'sharded' || info.uuid !== request.collectionUuid) {
      throw new TesseraError('STALE_CONFIG', `${request.ns} is not the sharded collection ${request.collectionUuid} this shard knows`, {
        details: { ns: request.ns },
      });
    }
    const range = chunkRangeFromWire(request.range);
    const min = Buffer.from(encodeKey(range.min));
    const max = Buffer.from(encodeKey(range.max));
    const chunk = info.table.chunkFor(min);
    if (chunk.shard !== shard || !rangesEqual(chunk.range, range)) {
      throw new TesseraError(
        'BAD_VALUE',
        `${chunkRangeToString(range)} of ${request.ns} is not a chunk owned by ${shard} (the chunk there is ${chunkRangeToString(chunk.range)} on ${chunk.shard})`,
        { details: { ns: request.ns, problem: 'notOwnedChunk' } },
      );
    }
    const table = tableName(info.uuid);
    if ((await this.storage.localCollection(request.ns))?.uuid !== info.uuid) {
      await this.storage.createCollection(info.uuid, { ns: request.ns, keyPattern: info.keyPatternObject });
    }
    const measured = await this.sizing.dataSize({ ns: request.ns, range: request.range });
    const size = { documents: measured.numObjects, bytes: measured.size };
    if (!request.forceJumbo && size.bytes > 2 * request.maxChunkSizeBytes) {
      throw new TesseraError(
        'CHUNK_TOO_BIG',
        `the chunk ${chunkRangeToString(range)} of ${request.ns} holds ${size.bytes} bytes in ${size.documents} documents, over twice the max chunk size of ${request.maxChunkSizeBytes} bytes; split it, or move it with forceJumbo`,
        { details: { ns: request.ns, bytes: size.bytes, documents: size.documents, maxChunkSizeBytes: request.maxChunkSizeBytes } },
      );
    }

    // Register, and record the coordinator and this side's pending range deletion, together.
    const minEjson = JSON.stringify(request.range.min);
    const maxEjson = JSON.stringify(request.range.max);
    await this.dataSource.transaction(async (manager) => {
      await registerMigration(manager, {
        migrationId: request.migrationId,
        role: 'donor',
        ns: request.ns,
        minEjson,
        maxEjson,
        otherShard: request.recipient,
      });
      await manager.query(
        `INSERT INTO migration_coordinators (id, ns, collection_uuid, min, max, min_ejson, max_ejson, recipient, recipient_url, pre_migration_version)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
        [
          request.migrationId,
          request.ns,
          info.uuid,
          min,
          max,
          minEjson,
          maxEjson,
          request.recipient,
          request.recipientUrl,
          JSON.stringify(metadata.shardVersion),
        ],
      );
      await this.rangeDeleter.recordPending(manager, {
        id: request.migrationId,
        ns: request.ns,
        collectionUuid: info.uuid,
        min,
        max,
        minEjson,
        maxEjson,
      });
    });
    this.metrics.started.inc();
    report('moveChunk.start', { documents: size.documents, bytes: size.bytes });
    mark('registered');

    const recipient = this.clients.migration(request.recipientUrl, PEER_TIMEOUT_MS);
    const row = (await this.coordinator(request.migrationId))!;
    let section: { blockReads(): void; release(): void } | undefined;
    let sectionStart = 0;
    let status: RecvChunkStatus | undefined;
    let decision: MigrationDecision = 'aborted';
    let commitSent = false;
    try {
      // Capture writes to the range before the first document is read, so none is missed.
      await this.captures.create(request.migrationId, table, min, max);
      this.donations.set(request.migrationId, { table, min, max });
      const indexes = await loadIndexes(this.dataSource.manager, table);
      await recipient.recvChunkStart({
        migrationId: request.migrationId,
        ns: request.ns,
        collectionUuid: info.uuid,
        keyPattern: info.keyPatternObject,
        range: request.range,
        donor: shard,
        donorUrl: advertisedUrl(this.settings),
        indexes: indexes.map((i) => ({ key: i.keyPattern, name: i.name, ...(i.unique ? { unique: true } : {}) })),
      });
      mark('cloning');
      await this.failpoints.pauseAt('migration.donor.cloning', request.ns);
      status = await this.waitForSteadyState(request.migrationId, recipient, report);
      mark('steady', { documentsCloned: status.documentsCloned, bytesCloned: status.bytesCloned });
      await this.failpoints.pauseAt('migration.donor.steady', request.ns);

      // The critical section: writes stop (those under way finish first), the recipient drains
      // the last captured writes, then reads stop too while the config server commits.
      section = await this.runtime.enterCriticalSection(request.ns, `migration ${request.migrationId}`);
      sectionStart = performance.now();
      mark('criticalSection');
      await this.failpoints.pauseAt('migration.donor.criticalSection', request.ns);
      const deadline = Date.now() + this.settings.TESSERA_MIGRATION_CRITICAL_SECTION_TIMEOUT_MS;
      status = await withDeadline(recipient.recvChunkCommit(request.migrationId), deadline, 'the recipient commit');
      mark('recipientCommitted', { documentsCloned: status.documentsCloned, bytesCloned: status.bytesCloned });
      section.blockReads();
      commitSent = true;
      decision = await this.commitOnConfig(request, info.table.collectionVersion, shard);
    } catch (error) {
      this.logger.warn({ err: error, migrationId: request.migrationId }, `migration ${request.migrationId} of ${request.ns} failed: ${(error as Error).message}`);
      // A commit sent and not known to have failed may have landed: the coordinator document
      // stays undecided (and the critical section held) for recovery to ask the config server.
      if (commitSent) throw error;
      await this.finish(row, decision, section, sectionStart);
      report('moveChunk.error', { error: (error as Error).message, phases });
      throw error;
    }
    if (decision === 'aborted') {
      await this.finish(row, decision, section, sectionStart);
      const error = new TesseraError('CONFLICTING_OPERATION', `the config server did not commit migration ${request.migrationId} of ${request.ns}`, {
        details: { migrationId: request.migrationId },
      });
      report('moveChunk.error', { error: error.message, phases });
      throw error;
    }
    mark('committed');
    await this.failpoints.pauseAt('migration.donor.committed', request.ns);
    const criticalSectionMs = await this.finish(row, decision, section, sectionStart);
    mark('released', { criticalSectionMs });
    mark('rangeDeletionScheduled', { orphanCleanupDelaySecs: this.rangeDeleter.donorDelaySecs });
    const result: MoveRangeResult = {
      migrationId: request.migrationId,
      ns: request.ns,
      donor: shard,
      recipient: request.recipient,
      range: request.range,
      documentsCloned: status?.documentsCloned ?? 0,
      bytesCloned: status?.bytesCloned ?? 0,
      criticalSectionMs,
      phases,
    };
    report('moveChunk.from', { phases, documentsCloned: result.documentsCloned, bytesCloned: result.bytesCloned, criticalSectionMs });
    if (request.waitForDelete) await this.rangeDeleter.waitForTask(request.migrationId);
    return result;
  }

  private async waitForSteadyState(
    migrationId: string,
    recipient: ReturnType<InternalClients['migration']>,
    report: (what: string, details: Record<string, unknown>) => void,
  ): Promise<RecvChunkStatus> {
    let lastReport = performance.now();
    for (;;) {
      if (this.stopped) throw new TesseraError('SHUTDOWN_IN_PROGRESS', 'the donor is shutting down');
      const status = await recipient.recvChunkStatus(migrationId);
      if (status.state === 'failed') throw recipientFailure(status.error);
      if (status.state === 'steady') return status;
      if (performance.now() - lastReport >= PROGRESS_REPORT_MS) {
        lastReport = performance.now();
        report('moveChunk.progress', { state: status.state, documentsCloned: status.documentsCloned, bytesCloned: status.bytesCloned });
      }
      await sleep(STATUS_POLL_MS);
    }
  }

  /**
   * Commits on the config server. A refusal is an abort; when the outcome is unknown (the
   * config server did not answer), the decision is asked for until it can be had: the config
   * server records an abort if the commit did not land, so a late commit cannot follow.
   */
  private async commitOnConfig(request: DonorMoveRangeRequest, collectionVersion: { epoch: string; timestamp: { t: number; i: number } }, shard: string): Promise<MigrationDecision> {
    const config = await this.configClient();
    try {
      await config.commitMigration({
        ns: request.ns,
        expectedCollectionVersion: { epoch: collectionVersion.epoch, timestamp: collectionVersion.timestamp },
        range: request.range,
        donor: shard,
        recipient: request.recipient,
        migrationId: request.migrationId,
      });
      return 'committed';
    } catch (error) {
      this.logger.warn({ err: error }, `the commit of migration ${request.migrationId} failed or went unanswered; asking the config server for the decision`);
      return this.decisionFromConfig(request.migrationId);
    }
  }

  private async decisionFromConfig(migrationId: string): Promise<MigrationDecision> {
    const { decision } = await this.untilDone(`learn the decision of migration ${migrationId}`, async () =>
      (await this.configClient()).decideMigration(migrationId),
    );
    return decision;
  }

  /**
   * Ends a migration by its decision, on both sides, in the reference's order: records the
   * decision; refreshes this shard's metadata and leaves the critical section; then, committed,
   * the recipient forgets its range deletion and this side's becomes ready, or, aborted, this
   * side's is dropped and the recipient's becomes ready; last, the coordinator document and the
   * registration go. Idempotent: recovery runs it again after a crash at any step. Answers how
   * long the critical section was held.
   */
  private async finish(
    row: CoordinatorRow,
    decision: MigrationDecision,
    section: { release(): void } | undefined,
    sectionStart: number,
  ): Promise<number> {
    await this.dataSource.query('UPDATE migration_coordinators SET decision = $2 WHERE id = $1', [row.id, decision]);
    this.donations.delete(row.id);
    if (decision === 'committed') {
      const state = await this.runtime.state();
      state.invalidate(row.ns);
      await state.checkShardVersion(row.ns, IGNORED_VERSION).catch(() => undefined);
    }
    section?.release();
    const criticalSectionMs = section === undefined ? 0 : performance.now() - sectionStart;
    if (section !== undefined) this.metrics.criticalSection.observe(criticalSectionMs / 1000);
    // Outside the critical section: the range is no longer written here (it moved, or the recipient's copy is dropped).
    await this.captures.drop(row.id, tableName(row.collection_uuid));

    const recipient = this.clients.migration(row.recipient_url, PEER_TIMEOUT_MS);
    const releaseRecipient = () => this.untilDone(`release migration ${row.id} on ${row.recipient}`, () => recipient.recvChunkRelease({ migrationId: row.id, decision }));
    if (decision === 'committed') {
      await releaseRecipient();
      await this.dataSource.transaction(async (manager) => {
        await this.rangeDeleter.markReady(manager, row.id, this.rangeDeleter.donorDelaySecs);
        await manager.query('DELETE FROM migration_coordinators WHERE id = $1', [row.id]);
        await unregisterMigration(manager, row.id);
      });
      this.rangeDeleter.poke();
      this.metrics.committed.inc();
    } else {
      await this.dataSource.transaction(async (manager) => {
        await this.rangeDeleter.remove(manager, row.id);
      });
      await releaseRecipient();
      await this.dataSource.transaction(async (manager) => {
        await manager.query('DELETE FROM migration_coordinators WHERE id = $1', [row.id]);
        await unregisterMigration(manager, row.id);
      });
      this.metrics.aborted.inc();
    }
    return Math.round(criticalSectionMs * 10) / 10;
  }

  private async recover(rows: CoordinatorRow[], sections: Map<string, { blockReads(): void; release(): void }>): Promise<void> {
    try {
      for (const row of rows) {
        const decision = row.decision ?? (await this.decisionFromConfig(row.id));
        this.logger.info({ migrationId: row.id, ns: row.ns, decision }, `recovering migration ${row.id} of ${row.ns}: ${decision}`);
        const section = sections.get(row.ns);
        sections.delete(row.ns);
        await this.finish(row, decision, section, performance.now());
        this.reporter.report({ what: 'moveChunk.recovered', ns: row.ns, details: { migrationId: row.id, decision } });
      }
      // Leftovers of a crash before a coordinator document was written.
      await this.dataSource.transaction(async (manager) => {
        const active = await registeredMigration(manager);
        if (active?.role === 'donor') await unregisterMigration(manager, active.migrationId);
      });
      await this.captures.dropStray([...this.donations.keys()]);
    } catch (error) {
      if (!this.stopped) this.logger.error({ err: error }, `migration recovery failed: ${(error as Error).message}`);
    } finally {
      for (const section of sections.values()) section.release();
    }
  }

  private async untilDone<T>(what: string, work: () => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await work();
      } catch (error) {
        if (this.stopped) throw error;
        this.logger.warn({ err: error }, `${what}: ${(error as Error).message}; retrying`);
        await sleep(Math.min(2_000, 100 * 2 ** attempt));
      }
    }
  }

  private async coordinator(id: string): Promise<CoordinatorRow | undefined> {
    const rows: CoordinatorRow[] = await this.dataSource.query('SELECT * FROM migration_coordinators WHERE id = $1', [id]);
    return rows[0];
  }

  private async configClient() {
    const identity = await this.identity.get();
    if (identity === null) throw new TesseraError('ILLEGAL_OPERATION', 'this shard has not been added to a cluster yet');
    return this.clients.config(identity.configUrl);
  }
}

async function withDeadline<T>(work: Promise<T>, deadline: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new TesseraError('EXCEEDED_TIME_LIMIT', `the critical section timed out waiting for ${what}`)),
      Math.max(0, deadline - Date.now()),
    );
  });
  try {
    return await Promise.race([work, expired]);
  } finally {
    clearTimeout(timer);
  }
}
