import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { ObjectId } from 'bson';
import type { Logger } from 'pino';
import { DataSource } from 'typeorm';
import {
  type ChunkVersion,
  type ClusterTimestamp,
  IGNORED_VERSION,
  TesseraError,
  type ValueObject,
  clusterTimestampToString,
  compareClusterTimestamps,
} from '@tessera/core';
import type { TransactionFields } from '@tessera/protocol';
import {
  type AggregateCommand,
  type CountCommand,
  type CreateIndexesCommand,
  type CreateIndexesResult,
  type DropIndexesCommand,
  type DropIndexesResult,
  type ListIndexesCommand,
  type ListedIndex,
  createIndexesCommandSchema,
  dropIndexesCommandSchema,
  listIndexesCommandSchema,
  type CursorBatch,
  type DeleteCommand,
  type DeleteCommandResult,
  type DistinctCommand,
  type FindAndModifyCommand,
  type FindAndModifyResult,
  type FindCommand,
  type GetMoreCommand,
  type InsertCommand,
  type InsertCommandResult,
  type UpdateCommand,
  type UpdateCommandResult,
  countCommandSchema,
  deleteCommandSchema,
  distinctCommandSchema,
  findAndModifyCommandSchema,
  aggregateCommandSchema,
  findCommandSchema,
  getMoreCommandSchema,
  insertCommandSchema,
  namespaceSchema,
  updateCommandSchema,
} from '@tessera/protocol';
import { checkPipeline } from '@tessera/query';
import { Failpoints, LOGGER, type Periodic, parseWith, raceTimeLimit, runPeriodically, timeLimitOf } from '@tessera/platform';
import { SnapshotHistory } from '../history/snapshot-history.service.js';
import { WriteTimes } from '../history/write-times.service.js';
import { clusterTimeToSql } from '../history/write-time.js';
import { RetryableWriteService } from '../sessions/retryable-write.service.js';
import { retryableInsertOf, retryableWriteOf } from '../sessions/retryable-write.js';
import { type StatementHistory, inPhase } from './statement-history.js';
import type { ReadOptions } from './document-scan.js';
import { ShardingRuntime } from '../sharding/sharding-runtime.service.js';
import { CollectionResolver, type ResolvedCollection, type Versioned } from './collection-resolver.js';
import { CursorManager } from './cursor-manager.js';
import { DocumentAggregates } from './document-aggregates.js';
import { type CollectionHandle, DocumentStore } from './document-store.js';
import { DocumentWrites } from './document-writes.js';
import { collationFromWire, deleteStatementsOf, findAndModifyRequestOf, fromWire, updateStatementsOf } from './write-statements.js';
import { SecondaryIndexCatalog } from './index-catalog.js';
import { type TransactionStatement, TransactionParticipants } from '../transactions/transaction-participants.service.js';

const CURSOR_REAP_INTERVAL_MS = 60_000;

/**
 * The shard's versioned data commands. Each one first checks the sender's routing version
 * (refreshing from the config server when the sender is ahead) and takes the ownership view it
 * will filter orphans with, then runs on the collection's table. An unsharded collection is
 * created on the database's primary shard by its first write.
 */
@Injectable()
export class ShardDataService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly store: DocumentStore;
  private readonly cursors: CursorManager;
  private readonly writes: DocumentWrites;
  private readonly aggregates: DocumentAggregates;
  private readonly indexes: SecondaryIndexCatalog;
  private reaper: Periodic | undefined;

  constructor(
    dataSource: DataSource,
    private readonly collections: CollectionResolver,
    private readonly runtime: ShardingRuntime,
    private readonly retryable: RetryableWriteService,
    private readonly writeTimes: WriteTimes,
    private readonly history: SnapshotHistory,
    private readonly transactions: TransactionParticipants,
    private readonly failpoints: Failpoints,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {
    this.store = new DocumentStore(dataSource);
    this.cursors = new CursorManager(dataSource);
    this.writes = new DocumentWrites(dataSource, { now: () => new Date(), generateId: () => new ObjectId() });
    this.aggregates = new DocumentAggregates(dataSource);
    this.indexes = new SecondaryIndexCatalog(dataSource);
  }

  onApplicationBootstrap(): void {
    this.reaper = runPeriodically(
      async () => {
        const reaped = this.cursors.reapIdle();
        if (reaped > 0) this.logger.info({ reaped }, `closed ${reaped} idle cursor(s)`);
      },
      CURSOR_REAP_INTERVAL_MS,
      () => undefined,
    );
  }

  onApplicationShutdown(): void {
    this.reaper?.stop();
  }

  async insert(input: InsertCommand): Promise<InsertCommandResult> {
    const command = parseWith(insertCommandSchema, input, 'insert command');
    if (command.transaction !== undefined) {
      const documents = command.documents;
      return this.inTransaction(command, command.transaction, true, 'write', unreachable, (handle) =>
        this.store.insert(handle, documents, { ordered: command.ordered, generateId: () => new ObjectId() }),
      );
    }
    const parts = retryableInsertOf(command, command.documents);
    return this.withHandle(command, true, 'write', unreachable, async (handle, collectionUuid) => {
      const insert = (history?: StatementHistory) =>
        this.store.insert(handle, command.documents, { ordered: command.ordered, generateId: () => new ObjectId(), history });
      if (parts === undefined) return insert();
      const { result, retried } = await this.retryable.runParts(parts, collectionUuid, insert);
      if (command.sessionParts !== undefined) return { ...result, retriedByPart: retried };
      return retried[0]!.length === 0 ? result : { ...result, retriedStmtIds: retried[0]! };
    });
  }

  /** Starts a query; a cursor keeps the query's ownership view (and its lease) until it is closed. */
  async find(input: FindCommand): Promise<CursorBatch> {
    const command = parseWith(findCommandSchema, input, 'find command');
    const request = {
      filter: fromWire(command.filter),
      ...(command.sort ? { sort: fromWire(command.sort) } : {}),
      ...(command.projection ? { projection: fromWire(command.projection) } : {}),
      ...(command.skip !== undefined ? { skip: command.skip } : {}),
      ...(command.limit !== undefined ? { limit: command.limit } : {}),
      ...(command.batchSize !== undefined ? { batchSize: command.batchSize } : {}),
      ...(command.let !== undefined ? { variables: fromWire(command.let) as ValueObject } : {}),
      ...readOptionsOf(command),
    };
    return raceTimeLimit(request.timeLimit, () =>
      this.openCursor(command, (handle, release) => this.cursors.find(handle, request, release)),
    );
  }

  /** Runs an aggregation's shard part, answered as a cursor like a find's. */
  async aggregate(input: AggregateCommand): Promise<CursorBatch> {
    const command = parseWith(aggregateCommandSchema, input, 'aggregate command');
    const stages = checkPipeline(command.pipeline.map((stage) => fromWire(stage)));
    const read = readOptionsOf(command);
    const options = {
      ...(command.let === undefined ? {} : { variables: fromWire(command.let) as ValueObject }),
      collation: read.collation,
    };
    const request = { filter: fromWire(command.filter), batchSize: command.batchSize, timeLimit: read.timeLimit };
    return raceTimeLimit(read.timeLimit, () =>
      this.openCursor(command, (handle, release) => this.cursors.aggregate(handle, request, stages, options, release)),
    );
  }

  /**
   * Opens a query's cursor with `open` (a find, an aggregation's shard part), in the command's
   * transaction or at its read concern; a missing collection answers empty. The cursor keeps the
   * query's ownership view (and its lease) until `release` runs at its close.
   */
  private async openCursor(
    command: Versioned & { transaction?: TransactionFields | undefined; readConcern?: FindCommand['readConcern'] },
    open: (handle: CollectionHandle, release: () => void) => Promise<CursorBatch>,
  ): Promise<CursorBatch> {
    if (command.transaction !== undefined) {
      return this.inTransaction(command, command.transaction, false, 'read', () => ({ cursorId: null, documents: [] }), open, false);
    }
    const atClusterTime = await this.history.admit(command.readConcern);
    const resolved = await this.collections.resolve(command, false, 'read');
    if (resolved === undefined) return { cursorId: null, documents: [] };
    try {
      await this.failpoints.pauseAt('shard.read.beforeScan', command.ns);
      return await open(asOf(resolved, atClusterTime), resolved.lease.release);
    } catch (error) {
      resolved.lease.release();
      throw error;
    }
  }

  getMore(input: GetMoreCommand): Promise<CursorBatch> {
    const command = parseWith(getMoreCommandSchema, input, 'getMore command');
    return this.cursors.getMore(command.cursorId, command.batchSize);
  }

  killCursors(cursorIds: string[]): { killed: string[]; notFound: string[] } {
    return this.cursors.kill(cursorIds);
  }

  async update(input: UpdateCommand): Promise<UpdateCommandResult> {
    const command = parseWith(updateCommandSchema, input, 'update command');
    const statements = updateStatementsOf(command);
    const noneUpdated = (): UpdateCommandResult => ({ matchedCount: 0, modifiedCount: 0, upserted: [], writeErrors: [] });
    if (command.transaction !== undefined) {
      return this.inTransaction(
        command,
        command.transaction,
        command.updates.some((u) => u.upsert),
        'write',
        noneUpdated,
        (handle) => this.writes.update(handle, statements, command.ordered),
      );
    }
    const write = retryableWriteOf(command, statements, (s) => (s.multi ? 'an update with multi: true' : undefined));
    return this.withHandle<UpdateCommandResult>(
      command,
      command.updates.some((u) => u.upsert),
      'write',
      noneUpdated,
      (handle, collectionUuid) =>
        this.retryable.run(
          write,
          collectionUuid,
          inPhase(command.withoutShardKey, noneUpdated, (history) => this.writes.update(handle, statements, command.ordered, history)),
        ),
    );
  }

  async delete(input: DeleteCommand): Promise<DeleteCommandResult> {
    const command = parseWith(deleteCommandSchema, input, 'delete command');
    const statements = deleteStatementsOf(command);
    const noneDeleted = (): DeleteCommandResult => ({ deletedCount: 0, writeErrors: [] });
    if (command.transaction !== undefined) {
      return this.inTransaction(command, command.transaction, false, 'write', noneDeleted, (handle) =>
        this.writes.delete(handle, statements, command.ordered),
      );
    }
    const write = retryableWriteOf(command, statements, (s) => (s.limit === 0 ? 'a delete with limit: 0' : undefined));
    return this.withHandle<DeleteCommandResult>(command, false, 'write', noneDeleted, (handle, collectionUuid) =>
      this.retryable.run(
        write,
        collectionUuid,
        inPhase(command.withoutShardKey, noneDeleted, (history) => this.writes.delete(handle, statements, command.ordered, history)),
      ),
    );
  }

  async findAndModify(input: FindAndModifyCommand): Promise<FindAndModifyResult> {
    const command = parseWith(findAndModifyCommandSchema, input, 'findAndModify command');
    const request = findAndModifyRequestOf(command);
    const noneFound = (): FindAndModifyResult => ({ value: null, lastErrorObject: { n: 0, updatedExisting: false } });
    if (command.transaction !== undefined) {
      return this.inTransaction(command, command.transaction, command.upsert, 'write', noneFound, (handle) =>
        this.writes.findAndModify(handle, request),
      );
    }
    const write = retryableWriteOf(command, [request]);
    return this.withHandle<FindAndModifyResult>(command, command.upsert, 'write', noneFound, (handle, collectionUuid) =>
      this.retryable.run(
        write,
        collectionUuid,
        inPhase(command.withoutShardKey, noneFound, (history) => this.writes.findAndModify(handle, request, history)),
      ),
    );
  }

  async count(input: CountCommand): Promise<{ n: number }> {
    const command = parseWith(countCommandSchema, input, 'count command');
    const read = readOptionsOf(command);
    return raceTimeLimit(read.timeLimit, () =>
      this.readWith(
        command,
        () => ({ n: 0 }),
        async (handle) => ({ n: await this.aggregates.count(handle, fromWire(command.filter), command.skip, command.limit, read) }),
      ),
    );
  }

  async distinct(input: DistinctCommand): Promise<{ values: unknown[] }> {
    const command = parseWith(distinctCommandSchema, input, 'distinct command');
    const read = readOptionsOf(command);
    return raceTimeLimit(read.timeLimit, () =>
      this.readWith(
        command,
        () => ({ values: [] }),
        async (handle) => ({ values: await this.aggregates.distinct(handle, command.key, fromWire(command.filter), read) }),
      ),
    );
  }

  /** A read's work on its collection, in its transaction or at its read concern; `missing` when the collection is not here. */
  private async readWith<T>(
    command: Versioned & { transaction?: TransactionFields | undefined; readConcern?: FindCommand['readConcern'] },
    missing: () => T,
    work: (handle: CollectionHandle) => Promise<T>,
  ): Promise<T> {
    if (command.transaction !== undefined) return this.inTransaction(command, command.transaction, false, 'read', missing, work);
    const atClusterTime = await this.history.admit(command.readConcern);
    return this.withHandle(command, false, { read: atClusterTime }, missing, work);
  }

  /**
   * Builds secondary indexes. An unsharded collection missing on its primary is created first,
   * as a first write would; a sharded collection's table is created on every shard the router
   * asks, so that a shard whose first document comes later already has the indexes.
   */
  async createIndexes(input: CreateIndexesCommand): Promise<CreateIndexesResult> {
    const command = parseWith(createIndexesCommandSchema, input, 'createIndexes command');
    const resolved = (await this.collections.resolve(command, true, 'write'))!;
    try {
      this.collections.forgetScanIndexes(resolved.handle.table);
      const counts = await this.indexes
        .create(resolved.collection, command.indexes)
        .finally(() => this.collections.forgetScanIndexes(resolved.handle.table));
      return { ...counts, createdCollectionAutomatically: resolved.created && !resolved.collection.sharded };
    } finally {
      resolved.lease.release();
    }
  }

  /** The collection's indexes here; empty when this shard has no table for it. */
  async listIndexes(input: ListIndexesCommand): Promise<{ indexes: ListedIndex[] }> {
    const command = parseWith(listIndexesCommandSchema, input, 'listIndexes command');
    const resolved = await this.collections.resolve(command, false, 'read');
    if (resolved === undefined) return { indexes: [] };
    try {
      return { indexes: await this.indexes.list(resolved.collection) };
    } finally {
      resolved.lease.release();
    }
  }

  /** Drops a secondary index by name; `nIndexesWas: 0` when this shard has no table for the collection. */
  async dropIndexes(input: DropIndexesCommand): Promise<DropIndexesResult> {
    const command = parseWith(dropIndexesCommandSchema, input, 'dropIndexes command');
    const resolved = await this.collections.resolve(command, false, 'write');
    if (resolved === undefined) return { nIndexesWas: 0 };
    try {
      return await this.indexes
        .drop(resolved.collection, command.name)
        .finally(() => this.collections.forgetScanIndexes(resolved.handle.table));
    } finally {
      resolved.lease.release();
    }
  }

  /**
   * Forgets and reloads this shard's filtering metadata of `ns` (MongoDB's
   * _flushRoutingTableCacheUpdates): what a migration's donor and recipient do after the commit,
   * so that a sender with the old version is told STALE_CONFIG. Answers the new shard version.
   */
  async refreshMetadata(ns: string): Promise<{ shardVersion: ChunkVersion }> {
    const state = await this.runtime.state();
    state.invalidate(parseWith(namespaceSchema, ns, 'namespace'));
    return { shardVersion: (await state.checkShardVersion(ns, IGNORED_VERSION)).shardVersion };
  }

  /**
   * Runs a transaction's statement (`TransactionParticipants.statement`) with its handle. The
   * lease on the ownership view is released after `work`, or by `work` when `releaseAfter` is
   * false (a cursor releases it when it closes).
   */
  private inTransaction<T>(
    command: Versioned,
    transaction: TransactionFields,
    create: boolean,
    kind: 'write' | 'read',
    missing: () => T,
    work: (handle: CollectionHandle, release: () => void) => Promise<T>,
    releaseAfter = true,
  ): Promise<T> {
    // Test-only: the design of a REPEATABLE READ transaction per shard plus 2PC, which lets a
    // reader see a transaction committed on one shard and not yet on another: no wait for the
    // safe time, and reads of the latest committed versions instead of the snapshot's.
    const unsafe = this.failpoints.isOn('shard.transactions.readLatest', command.ns);
    return this.transactions.statement(transaction, { admit: !unsafe }, async (statement) => {
      const resolved = await this.collections.resolve(command, create, kind);
      if (resolved === undefined) return missing();
      const readLatest = unsafe && kind === 'read';
      try {
        const handle = inTransactionHandle(resolved, statement);
        return await work(readLatest ? { ...handle, snapshot: undefined } : handle, resolved.lease.release);
      } catch (error) {
        if (!releaseAfter) resolved.lease.release();
        throw error;
      } finally {
        if (releaseAfter) resolved.lease.release();
      }
    });
  }

  /**
   * Runs `work` with the command's handle (and collection uuid) and releases the lease after;
   * `missing` when the collection is not here. A write runs with its time (`WriteTimes`); a read
   * with `read` set to a time sees the collection as of that time.
   */
  private async withHandle<T>(
    command: Versioned,
    create: boolean,
    kind: 'write' | { read: ClusterTimestamp | undefined },
    missing: () => T,
    work: (handle: CollectionHandle, collectionUuid: string) => Promise<T>,
  ): Promise<T> {
    const resolved = await this.collections.resolve(command, create, kind === 'write' ? 'write' : 'read');
    if (resolved === undefined) return missing();
    try {
      if (kind !== 'write') return await work(asOf(resolved, kind.read), resolved.collection.uuid);
      return await this.writeTimes.run((writeTime) => work({ ...resolved.handle, writeTime }, resolved.collection.uuid));
    } finally {
      resolved.lease.release();
    }
  }
}

/**
 * The handle a transaction's statement runs with: the collection at the transaction's snapshot,
 * in the transaction's Postgres transaction, with the snapshot as the time of what it writes.
 */
function inTransactionHandle(resolved: ResolvedCollection, statement: TransactionStatement): CollectionHandle {
  return { ...asOf(resolved, statement.atClusterTime), writeTime: statement.writeTime, transaction: statement.work };
}

/**
 * The handle a read runs with: the collection now, or at `atClusterTime` its rows and kept
 * versions as they were then, with orphans filtered by the placement of that time. Secondary
 * indexes hold only the current documents, so a read of the past does not narrow by them.
 */
function asOf(resolved: ResolvedCollection, atClusterTime: ClusterTimestamp | undefined): CollectionHandle {
  if (atClusterTime === undefined) return resolved.handle;
  const { historySince } = resolved;
  if (historySince !== null && compareClusterTimestamps(atClusterTime, historySince) < 0) {
    throw new TesseraError(
      'SNAPSHOT_UNAVAILABLE',
      `Unable to read from a snapshot at ${clusterTimestampToString(atClusterTime)}: ${resolved.collection.ns} was moved to this shard by movePrimary with its history from ${clusterTimestampToString(historySince)} on; retry at a later time`,
      { details: { ns: resolved.collection.ns, atClusterTime, historySince } },
    );
  }
  const { metadata } = resolved.lease;
  const { ownedRanges: _current, ...handle } = resolved.handle;
  return {
    ...handle,
    indexes: [],
    owns: (encodedKey) => metadata.ownsAt(encodedKey, atClusterTime),
    snapshot: { collectionUuid: resolved.collection.uuid, time: clusterTimeToSql(atClusterTime) },
  };
}

function unreachable(): never {
  throw new Error('a write that may create its collection always resolves it');
}

/** A read command's collation, checked (`parseCollation`), and its time limit. */
function readOptionsOf(command: { collation?: Record<string, unknown> | undefined; maxTimeMS?: number | undefined }): ReadOptions {
  const collation = collationFromWire(command.collation);
  const timeLimit = timeLimitOf(command.maxTimeMS);
  return { ...(collation !== undefined ? { collation } : {}), ...(timeLimit !== undefined ? { timeLimit } : {}) };
}
