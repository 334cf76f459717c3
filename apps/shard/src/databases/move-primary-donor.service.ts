import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { KEY_SPACE_END, TesseraError } from '@tessera/core';
import { parseWith } from '@tessera/platform';
import {
  type CloneSource,
  type SessionHistoryBatch,
  cloneRowsRequestSchema,
  collectionSessionHistoryRequestSchema,
  dropStaleDataSchema,
} from '@tessera/protocol';
import { CollectionStorageService, tableName } from '../collections/collection-storage.service.js';
import { loadIndexes } from '../documents/index-maintenance.js';
import { copyTableOut } from '../migration/copy-transfer.js';
import { SessionRecords } from '../sessions/session-records.service.js';
import { ShardingRuntime } from '../sharding/sharding-runtime.service.js';
import { TransactionParticipants } from '../transactions/transaction-participants.service.js';

/**
 * The old primary's side of movePrimary: it serves its unsharded collections to the new primary
 * (each collection's uuid, key pattern and indexes, its rows in `_id` order as COPY text, and its
 * retry history, while its critical section keeps them still), and drops them once the move has
 * committed.
 */
@Injectable()
export class MovePrimaryDonor {
  constructor(
    private readonly dataSource: DataSource,
    private readonly storage: CollectionStorageService,
    private readonly runtime: ShardingRuntime,
    private readonly participants: TransactionParticipants,
    private readonly sessionRecords: SessionRecords,
  ) {}

  async cloneSource(ns: string): Promise<CloneSource> {
    const local = await this.stored(ns);
    const indexes = await loadIndexes(this.dataSource.manager, tableName(local.uuid));
    return {
      uuid: local.uuid,
      keyPattern: local.keyPattern,
      indexes: indexes.map((i) => ({ key: i.keyPattern, name: i.name, ...(i.unique ? { unique: true } : {}) })),
    };
  }

  /**
   * A page of the collection's retry history. Served while the section blocks writes, after the
   * rows: no retryable write of the collection can be recorded meanwhile, so the pages are the
   * whole history, and a write retried at the new primary is answered from it, not run again.
   */
  async sessionHistory(ns: string, input: unknown): Promise<SessionHistoryBatch> {
    const { afterLsid, limit } = parseWith(collectionSessionHistoryRequestSchema, input, 'sessionHistory request');
    const local = await this.stored(ns);
    const wholeCollection = { collectionUuid: local.uuid, min: Buffer.alloc(0), max: Buffer.from(KEY_SPACE_END) };
    return { sessions: await this.sessionRecords.historyInRange(wholeCollection, afterLsid, limit) };
  }

  async cloneRows(ns: string, input: unknown): Promise<string> {
    const { after, limit } = parseWith(cloneRowsRequestSchema, input, 'cloneRows request');
    const local = await this.stored(ns);
    return copyTableOut(this.dataSource, tableName(local.uuid), after === undefined ? undefined : Buffer.from(after, 'hex'), limit);
  }

  /**
   * Drops the collections the move took away, after aborting the transactions that wrote to
   * them here (they cannot commit, and their row locks would hold the drop). Refused while the
   * catalog still names this shard the primary: the data would have nowhere else to be.
   */
  async dropStaleData(db: string, input: unknown): Promise<{ dropped: number }> {
    const { collections } = parseWith(dropStaleDataSchema, input, 'dropStaleData request');
    const state = await this.runtime.state();
    const primary = await state.refreshedPrimaryShardOf(db);
    if (primary === state.shardName) {
      throw new TesseraError('ILLEGAL_OPERATION', `shard ${state.shardName} is still the primary of ${db}; its collections are not stale`, {
        details: { db },
      });
    }
    await this.participants.abortWriting(collections, `database ${db} moved to primary shard ${primary} (movePrimary)`);
    let dropped = 0;
    for (const ns of collections) {
      if (await this.storage.dropNamespace(ns)) dropped++;
      state.invalidate(ns);
    }
    return { dropped };
  }

  private async stored(ns: string) {
    const local = await this.storage.localCollection(ns);
    if (local === undefined) throw new TesseraError('NAMESPACE_NOT_FOUND', `this shard stores no collection ${ns}`, { details: { ns } });
    return local;
  }
}
