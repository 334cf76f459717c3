import { Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import {
  type ChunkVersion,
  type ClusterTimestamp,
  TesseraError,
  UNSHARDED_VERSION,
  isUnshardedVersion,
  type ShardKeyPattern,
} from '@tessera/core';
import { namespaceSchema } from '@tessera/protocol';
import { parseWith } from '@tessera/platform';
import { AutoSplitter } from '../chunks/auto-splitter.service.js';
import { CollectionStorageService, tableName } from '../collections/collection-storage.service.js';
import { type OperationKind, type OperationLease, ShardingRuntime } from '../sharding/sharding-runtime.service.js';
import type { FilteringMetadata } from '../sharding/sharding-state.js';
import type { CollectionHandle } from './document-store.js';
import type { IndexedCollection } from './index-catalog.js';
import { loadIndexes } from './index-maintenance.js';

/** A data command's routing versions, as the router sends them. */
export interface Versioned {
  ns: string;
  shardVersion: ChunkVersion;
  databaseVersion?: { uuid: string; lastMod: number } | undefined;
}

/** A collection resolved for one command: its handle and catalog entry, and the lease on its ownership view. */
export interface ResolvedCollection {
  handle: CollectionHandle;
  collection: IndexedCollection;
  created: boolean;
  lease: OperationLease;
  /** The time from which the collection's history here is complete; null when it is since its creation. */
  historySince: ClusterTimestamp | null;
}

/**
 * Resolves a data command's collection on this shard: admits the command against its routing
 * versions, creates the collection's table when a write needs it, and attaches the secondary
 * indexes a scan may use.
 */
@Injectable()
export class CollectionResolver {
  /**
   * The side tables scans may use, by collection table. Index DDL on a collection runs on this
   * process (each shard owns its database) and forgets the entry, so it is never stale.
   */
  private readonly scanIndexes = new Map<string, Promise<Array<{ pattern: ShardKeyPattern; table: string }>>>();

  constructor(
    private readonly dataSource: DataSource,
    private readonly storage: CollectionStorageService,
    private readonly runtime: ShardingRuntime,
    private readonly autoSplitter: AutoSplitter,
  ) {}

  /** Forgets the scan indexes of `table`, after index DDL on it. */
  forgetScanIndexes(table: string): void {
    this.scanIndexes.delete(table);
  }

  /**
   * Admits the command (waiting out a migration's critical section, checking its routing
   * version) and answers the collection's handle: the table, the shard key and the ownership
   * view, with the lease the caller releases when it is done with that view. Undefined (and
   * nothing held) when the collection does not exist here and `create` is false: reads of a
   * missing collection find nothing.
   */
  async resolve(command: Versioned, create: boolean, kind: OperationKind): Promise<ResolvedCollection | undefined> {
    const ns = parseWith(namespaceSchema, command.ns, 'namespace');
    const state = await this.runtime.state();
    const lease = await this.runtime.enter(ns, kind, async () => {
      if (isUnshardedVersion(command.shardVersion)) {
        if (command.databaseVersion === undefined) {
          throw new TesseraError('BAD_VALUE', `a command on the unsharded collection ${ns} must carry the database version`, {
            details: { ns },
          });
        }
        await state.checkDatabaseVersion(ns.slice(0, ns.indexOf('.')), command.databaseVersion);
      }
      return state.checkShardVersion(ns, isUnshardedVersion(command.shardVersion) ? UNSHARDED_VERSION : command.shardVersion);
    });
    try {
      const resolved = await this.handleOf(ns, lease.metadata, create);
      if (resolved === undefined) lease.release();
      return resolved && { ...resolved, lease };
    } catch (error) {
      lease.release();
      throw error;
    }
  }

  private async handleOf(ns: string, metadata: FilteringMetadata, create: boolean) {
    const info = metadata.info;
    if (info.kind === 'sharded') {
      const local = await this.storage.localCollection(ns);
      const exists = local?.uuid === info.uuid;
      if (!exists && !create) return undefined;
      if (!exists) await this.storage.createCollection(info.uuid, { ns, keyPattern: info.keyPatternObject });
      const onWrite = (key: Uint8Array, bytes: number) => this.autoSplitter.noteWrite(ns, metadata, key, bytes);
      // The stored key pattern, which is the one the stored keys are encoded with: after a refine's
      // re-key it is already the new one while the cluster's metadata may still name the old one.
      // Old chunk bounds hold the same keys as the refined ones (the added fields start at MinKey).
      const pattern = exists ? local.pattern : info.keyPattern;
      const handle = { ns, table: tableName(info.uuid), pattern, owns: metadata.owns, ownedRanges: metadata.ownedRanges, onWrite };
      return this.withIndexes(handle, info.uuid, true, !exists, exists ? local.historySince : null);
    }
    let local = await this.storage.localCollection(ns);
    const created = local === undefined;
    if (local === undefined) {
      if (!create) return undefined;
      await this.storage.createCollection(randomUUID(), { ns, keyPattern: { _id: 1 } });
      local = (await this.storage.localCollection(ns))!;
    }
    const handle = { ns, table: tableName(local.uuid), pattern: local.pattern, owns: metadata.owns, ownedRanges: metadata.ownedRanges };
    return this.withIndexes(handle, local.uuid, false, created, local.historySince);
  }

  /** Adds the secondary indexes a scan may push its filter down to. */
  private async withIndexes(
    handle: CollectionHandle,
    uuid: string,
    sharded: boolean,
    created: boolean,
    historySince: ClusterTimestamp | null,
  ) {
    let loading = this.scanIndexes.get(handle.table);
    if (loading === undefined) {
      loading = loadIndexes(this.dataSource.manager, handle.table).then((all) => all.map((i) => ({ pattern: i.pattern, table: i.table })));
      loading.catch(() => this.scanIndexes.delete(handle.table));
      this.scanIndexes.set(handle.table, loading);
    }
    const indexes = await loading;
    const withIndexes: CollectionHandle = { ...handle, indexes };
    return {
      handle: withIndexes,
      collection: { uuid, table: handle.table, ns: handle.ns, shardKey: handle.pattern, sharded },
      created,
      historySince,
    };
  }
}
