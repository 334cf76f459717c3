/**
 * What the router asks each shard for a find, and what it does itself after the merge. Pure.
 *
 * One shard: everything is pushed down (filter, sort, projection, skip, limit); the router
 * only passes batches on. Several shards: each is asked for its first `skip + limit`
 * documents (it cannot know which of them the skip drops), sorted if a sort is given, and the
 * router merge-sorts, then skips and limits. A projection could remove the fields the merge
 * compares, so with a sort over several shards the router projects after the merge.
 */
import type { FindCommand } from '@tessera/protocol';

export interface FindRequest {
  readonly filter: Record<string, unknown>;
  readonly sort?: Record<string, unknown> | undefined;
  readonly projection?: Record<string, unknown> | undefined;
  readonly skip?: number | undefined;
  readonly limit?: number | undefined;
  readonly batchSize: number;
}

export interface ShardFindPlan {
  /** The command sent to each targeted shard, without `ns` and versions. */
  readonly command: Omit<FindCommand, 'ns' | 'shardVersion'>;
  /** Documents the router drops after the merge. */
  readonly routerSkip: number;
  readonly mergeSorted: boolean;
  readonly projectOnRouter: boolean;
}

export function planShardFind(request: FindRequest, shardCount: number): ShardFindPlan {
  const skip = request.skip ?? 0;
  const limit = request.limit ?? 0;
  const sort = request.sort !== undefined && Object.keys(request.sort).length > 0 ? request.sort : undefined;
  if (shardCount <= 1) {
    return {
      command: {
        filter: request.filter,
        ...(sort ? { sort } : {}),
        ...(request.projection ? { projection: request.projection } : {}),
        ...(skip > 0 ? { skip } : {}),
        ...(limit > 0 ? { limit } : {}),
        batchSize: limit > 0 ? Math.min(request.batchSize, limit) : request.batchSize,
      },
      routerSkip: 0,
      mergeSorted: false,
      projectOnRouter: false,
    };
  }
  const projectOnRouter = sort !== undefined && request.projection !== undefined;
  const wanted = skip + request.batchSize;
  return {
    command: {
      filter: request.filter,
      ...(sort ? { sort } : {}),
      ...(request.projection && !projectOnRouter ? { projection: request.projection } : {}),
      ...(limit > 0 ? { limit: skip + limit } : {}),
      batchSize: limit > 0 ? Math.min(wanted, skip + limit) : wanted,
    },
    routerSkip: skip,
    mergeSorted: sort !== undefined,
    projectOnRouter,
  };
}
