import { Injectable } from '@nestjs/common';
import { TesseraError } from '@tessera/core';
import type { ListedIndex } from '@tessera/protocol';
import { withStaleRetries } from '@tessera/routing';
import type { CreateIndexesBody } from '../api/request-schemas.js';
import { ClusterRoutingService, type CollectionRouting } from '../routing/cluster-routing.service.js';
import { type CreateIndexesResponse, type DropReply, mergeCreateIndexesReplies, mergeDropIndexesReplies } from './index-replies.js';

export interface ListIndexesResponse {
  cursor: { id: '0'; ns: string; firstBatch: ListedIndex[] };
  ok: 1;
}

/**
 * The index commands. Every shard keeps the indexes of the documents it stores, so index DDL
 * on a sharded collection goes to every shard in the registry (a shard owning no chunk yet gets
 * them too, so its first document is indexed), and on an unsharded collection to the database's
 * primary shard. A stale shard answer is retried with fresh routing; creating an index again is
 * a no-op, and a drop remembers that an earlier round dropped the index somewhere.
 */
@Injectable()
export class IndexesService {
  constructor(private readonly cluster: ClusterRoutingService) {}

  async createIndexes(ns: string, body: CreateIndexesBody): Promise<CreateIndexesResponse> {
    const collated = body.indexes.find((index) => index.collation !== undefined);
    if (collated !== undefined) {
      throw new TesseraError(
        'CANNOT_CREATE_INDEX',
        'an index with a collation is not supported: index keys are kept in byte order. Create it without one; reads with a collation scan.',
        { details: { key: collated.key } },
      );
    }
    return withStaleRetries(this.cluster.cache, ns, async () => {
      const routing = await this.cluster.routingForWrite(ns);
      const replies = await Promise.all(
        (await this.targets(routing)).map(async (shard) =>
          (await this.cluster.shard(shard)).createIndexes({ ns, ...routing.versioningFor(shard), indexes: body.indexes }),
        ),
      );
      return mergeCreateIndexesReplies(replies);
    });
  }

  /** From the primary shard (unsharded) or the first shard owning chunks; `NAMESPACE_NOT_FOUND` when the collection does not exist. */
  async listIndexes(ns: string): Promise<ListIndexesResponse> {
    return withStaleRetries(this.cluster.cache, ns, async () => {
      const routing = await this.cluster.routingForRead(ns);
      const shard =
        routing === undefined ? undefined : routing.kind === 'sharded' ? routing.table.shardIds().sort()[0] : routing.primaryShard;
      const indexes =
        routing === undefined || shard === undefined
          ? []
          : (await (await this.cluster.shard(shard)).listIndexes({ ns, ...routing.versioningFor(shard) })).indexes;
      if (indexes.length === 0) throw new TesseraError('NAMESPACE_NOT_FOUND', `ns does not exist: ${ns}`, { details: { ns } });
      return { cursor: { id: '0', ns, firstBatch: indexes }, ok: 1 };
    });
  }

  /**
   * The hints among `hints` that name no index of the collection (by name or key pattern, key
   * order included), as their `JSON.stringify`. `{ $natural: 1 | -1 }` names the collection's
   * scan; a missing collection refuses nothing (a read of it answers empty, a write creates it).
   */
  async missingHints(ns: string, hints: readonly unknown[]): Promise<Set<string>> {
    const asked = hints.filter((hint) => hint !== undefined && !isNaturalHint(hint));
    if (asked.length === 0) return new Set();
    let indexes: ListedIndex[];
    try {
      indexes = (await this.listIndexes(ns)).cursor.firstBatch;
    } catch (error) {
      if (error instanceof TesseraError && error.code === 'NAMESPACE_NOT_FOUND') return new Set();
      throw error;
    }
    const known = new Set(indexes.flatMap((index) => [JSON.stringify(index.name), JSON.stringify(index.key)]));
    return new Set(asked.map((hint) => JSON.stringify(hint)).filter((hint) => !known.has(hint)));
  }

  /** Throws `BAD_VALUE` when `hint` names no index of the collection (see `missingHints`). */
  async checkHint(ns: string, hint: unknown): Promise<void> {
    if (hint === undefined) return;
    if ((await this.missingHints(ns, [hint])).size > 0) throw badHint(hint);
  }

  async dropIndexes(ns: string, name: string): Promise<{ nIndexesWas: number; ok: 1 }> {
    let droppedBefore = false;
    return withStaleRetries(this.cluster.cache, ns, async () => {
      const routing = await this.cluster.routingForRead(ns);
      if (routing === undefined) throw new TesseraError('NAMESPACE_NOT_FOUND', `ns not found: ${ns}`, { details: { ns } });
      const replies = await Promise.all(
        (await this.targets(routing)).map(async (shard): Promise<DropReply> => {
          try {
            const reply = await (await this.cluster.shard(shard)).dropIndexes({ ns, ...routing.versioningFor(shard), name });
            if (reply.nIndexesWas > 0) droppedBefore = true;
            return { shard, reply };
          } catch (error) {
            if (error instanceof TesseraError) return { shard, error };
            throw error;
          }
        }),
      );
      return mergeDropIndexesReplies(ns, name, replies, droppedBefore);
    });
  }

  private async targets(routing: CollectionRouting): Promise<string[]> {
    return routing.kind === 'sharded' ? this.cluster.allShardNames() : [routing.primaryShard];
  }
}

function isNaturalHint(hint: unknown): boolean {
  if (hint === null || typeof hint !== 'object') return false;
  const keys = Object.keys(hint);
  const direction = (hint as Record<string, unknown>)['$natural'];
  return keys.length === 1 && (direction === 1 || direction === -1);
}

/** MongoDB's answer to a hint naming no index. */
export function badHint(hint: unknown): TesseraError {
  return new TesseraError('BAD_VALUE', `hint provided does not correspond to an existing index: ${JSON.stringify(hint)}`, {
    details: { hint },
  });
}
