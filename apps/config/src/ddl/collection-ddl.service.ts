import { Injectable } from '@nestjs/common';
import {
  type DropResult,
  type RefineShardKeyRequest,
  type ShardCollectionRequest,
  type ShardCollectionResult,
  dropCollectionRequestSchema,
  type RenameCollectionRequest,
  renameCollectionRequestSchema,
  refineShardKeyRequestSchema,
  shardCollectionRequestSchema,
} from '@tessera/protocol';
import { parseWith } from '@tessera/platform';
import { CollectionCatalogStore } from './collection-catalog.store.js';
import { DdlCoordinatorService } from './ddl-coordinator.service.js';

/**
 * Collection DDL as the controller and the control plane call it: each command validated, then
 * run by its coordinator (`shard-collection.coordinator.ts`, `drop-collection.coordinator.ts`,
 * `refine-shard-key.coordinator.ts`, `rename-collection.coordinator.ts`), serialised by the database and collection locks.
 */
@Injectable()
export class CollectionDdlService {
  constructor(
    private readonly coordinators: DdlCoordinatorService,
    private readonly catalog: CollectionCatalogStore,
  ) {}

  /**
   * Shards a collection: ranged keys start with one chunk [MinKey, MaxKey) on the database's
   * primary shard; a key whose first field is hashed is pre-split into `numInitialChunks`
   * (default 2 per shard) chunks spread over every active shard. The collection's table and
   * shard key index are created on the shards that receive chunks. Sharding again with the same
   * options answers the existing collection; with other options it is refused.
   */
  shardCollection(input: ShardCollectionRequest): Promise<ShardCollectionResult> {
    return this.coordinators.run('shardCollection', parseWith(shardCollectionRequestSchema, input, 'shardCollection request'));
  }

  dropCollection(input: unknown): Promise<DropResult> {
    return this.coordinators.run('dropCollection', parseWith(dropCollectionRequestSchema, input, 'dropCollection request'));
  }

  /** Renames an unsharded collection within its database (`rename-collection.coordinator.ts`). */
  renameCollection(input: RenameCollectionRequest): Promise<{ ok: 1 }> {
    return this.coordinators.run('renameCollection', parseWith(renameCollectionRequestSchema, input, 'renameCollection request'));
  }

  /** Refines a shard key by suffix fields: a new epoch, the same chunk majors and minors, documents re-keyed. */
  refineCollectionShardKey(input: RefineShardKeyRequest): Promise<ShardCollectionResult> {
    return this.coordinators.run(
      'refineCollectionShardKey',
      parseWith(refineShardKeyRequestSchema, input, 'refineCollectionShardKey request'),
    );
  }

  /** The sharded collection as the catalog has it; `NAMESPACE_NOT_FOUND` if it is not sharded. */
  describe(ns: string): Promise<ShardCollectionResult> {
    return this.catalog.describe(ns);
  }
}
