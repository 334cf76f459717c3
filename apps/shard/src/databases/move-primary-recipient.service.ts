import { setTimeout as sleep } from 'node:timers/promises';
import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import { TesseraError } from '@tessera/core';
import { Failpoints, InternalClients, LOGGER, SETTINGS, VectorClockService, parseWith } from '@tessera/platform';
import { type CloneCatalogData, type CloneCatalogDataStatus, type ShardClient, cloneCatalogDataSchema } from '@tessera/protocol';
import { CollectionStorageService, tableName } from '../collections/collection-storage.service.js';
import { CollectionResolver } from '../documents/collection-resolver.js';
import { WriteTimes } from '../history/write-times.service.js';
import { parseCopyRows } from '../migration/copy-transfer.js';
import { IncomingRangeStore } from '../migration/incoming-range.store.js';
import { IncomingSessionHistory } from '../migration/incoming-session-history.js';
import type { ShardSettings } from '../shard.settings.js';
import { ShardingRuntime } from '../sharding/sharding-runtime.service.js';

/** A clone this shard runs for a movePrimary, while it runs and after it ended. */
interface CloneJob {
  request: CloneCatalogData & { collections: string[] };
  status: CloneCatalogDataStatus;
  work: Promise<void>;
  failure?: unknown;
}

/** How long a `cloneCatalogData` call waits for the clone before it answers its progress. */
const ANSWER_WITHIN_MS = 2_000;

/**
 * The new primary's side of movePrimary (MongoDB's `_shardsvrCloneCatalogData`): it copies each
 * of the old primary's unsharded collections (uuid, key pattern, secondary indexes, the rows in
 * batches, then the retry history of its sessions) while the old primary's critical section
 * keeps them still. A collection is cloned whole or again from nothing: any copy already here
 * (an earlier attempt's, cut short by a kill) is dropped first, so the clone can be repeated
 * after any fault. The coordinator calls until the answer is `done`; each call joins the clone
 * already running for its operation.
 */
@Injectable()
export class MovePrimaryRecipient {
  private readonly jobs = new Map<string, CloneJob>();

  constructor(
    private readonly storage: CollectionStorageService,
    private readonly resolver: CollectionResolver,
    private readonly incoming: IncomingRangeStore,
    private readonly sessionHistory: IncomingSessionHistory,
    private readonly clients: InternalClients,
    private readonly runtime: ShardingRuntime,
    private readonly writeTimes: WriteTimes,
    private readonly clock: VectorClockService,
    private readonly failpoints: Failpoints,
    @Inject(SETTINGS) private readonly settings: ShardSettings,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  async cloneCatalogData(db: string, input: unknown): Promise<CloneCatalogDataStatus> {
    const request = parseWith(cloneCatalogDataSchema, input, 'cloneCatalogData request');
    let job = this.jobs.get(db);
    if (
      job !== undefined &&
      job.request.operationId !== request.operationId &&
      job.status.state === 'cloning' &&
      job.failure === undefined
    ) {
      throw new TesseraError(
        'CONFLICTING_OPERATION',
        `database ${db} is being cloned here for another movePrimary (${job.request.operationId})`,
        {
          details: { db },
        },
      );
    }
    if (job === undefined || job.request.operationId !== request.operationId || job.failure !== undefined) {
      job = this.start(db, request);
    }
    await Promise.race([job.work, sleep(ANSWER_WITHIN_MS)]);
    if (job.failure !== undefined) throw job.failure;
    return job.status;
  }

  private start(db: string, request: CloneJob['request']): CloneJob {
    const status: CloneCatalogDataStatus = {
      state: 'cloning',
      collections: request.collections.map((ns) => ({ ns, documents: 0, bytes: 0, sessions: 0, done: false })),
    };
    const job: CloneJob = { request, status, work: Promise.resolve() };
    job.work = this.clone(db, job).catch((error: unknown) => {
      job.failure = error;
    });
    this.jobs.set(db, job);
    return job;
  }

  private async clone(db: string, job: CloneJob): Promise<void> {
    const donor = this.clients.shard(job.request.from);
    for (const progress of job.status.collections) {
      await this.cloneCollection(donor, progress);
      this.logger.info({ db, ...progress }, `movePrimary: cloned ${progress.ns} (${progress.documents} documents)`);
    }
    job.status.state = 'done';
  }

  /** Drops any copy of the collection here, creates it as the donor has it, and copies its rows and retry history. */
  private async cloneCollection(donor: ShardClient, progress: CloneCatalogDataStatus['collections'][number]): Promise<void> {
    const { ns } = progress;
    const source = await donor.cloneSource(ns);
    await this.storage.dropNamespace(ns);
    await this.storage.createCollection(source.uuid, { ns, keyPattern: source.keyPattern });
    const table = tableName(source.uuid);
    await this.incoming.createIndexesOf({ uuid: source.uuid, table, ns, keyPattern: source.keyPattern, sharded: false }, source.indexes);
    const limit = this.settings.TESSERA_MIGRATION_CLONE_BATCH_DOCUMENTS;
    for (let after: string | undefined; ;) {
      const text = await donor.cloneRows(ns, { limit, ...(after === undefined ? {} : { after }) });
      const rows = parseCopyRows(text);
      await this.writeTimes.run((writeTime) => this.incoming.applyClone({ ns, table }, text, rows, writeTime));
      progress.documents += rows.length;
      for (const row of rows) progress.bytes += row.size;
      if (rows.length < limit) break;
      after = rows[rows.length - 1]!.id;
      await this.failpoints.pauseAt('movePrimary.recipient.cloneBatch', ns);
    }
    progress.sessions = await this.sessionHistory.receiveCollection(donor, ns, source.uuid);
    // Every cloned row is stamped before now: snapshot reads from now on find them all, earlier
    // ones would miss the versions the clone did not bring.
    await this.storage.markHistorySince(source.uuid, this.clock.now().clusterTime);
    this.resolver.forgetScanIndexes(table);
    progress.done = true;
    (await this.runtime.state()).invalidate(ns);
  }
}
