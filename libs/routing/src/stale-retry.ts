import { type ChunkVersion, TesseraError } from '@tessera/core';
import type { CatalogCache } from './catalog-cache.js';

/** MongoDB's mongos retries an operation that met stale routing up to 10 times. */
export const MAX_STALE_RETRIES = 10;

/**
 * Runs `attempt` and, when a shard answers that routing was stale (`STALE_CONFIG`,
 * `STALE_EPOCH`, `STALE_DB_VERSION`), marks the namespace stale in the cache and tries again,
 * at most `MAX_STALE_RETRIES` times; the last stale error is then thrown. Other errors pass through.
 *
 * `SHARD_NOT_FOUND` (the shard registry, even reloaded, has no shard of that name) is stale
 * routing too: the cached table or database names a shard that has left the cluster since it
 * was loaded (removeShard drained it while this router read nothing that came back stale), so
 * the namespace and its database are loaded again; a fresh table that still names it fails
 * after the retries, as any persistent stale error does.
 */
export async function withStaleRetries<T>(cache: CatalogCache, ns: string, attempt: (round: number) => Promise<T>): Promise<T> {
  for (let round = 0; ; round++) {
    try {
      return await attempt(round);
    } catch (error) {
      if (round + 1 >= MAX_STALE_RETRIES || !markStale(cache, ns, error)) throw error;
    }
  }
}

/**
 * Marks what `error` says is stale in the cache when it is a stale-routing answer about `ns`
 * (see `withStaleRetries`); answers whether it was. For callers that retry only part of a batch.
 */
export function markStale(cache: CatalogCache, ns: string, error: unknown): boolean {
  if (!(error instanceof TesseraError)) return false;
  switch (error.code) {
    case 'STALE_CONFIG':
    case 'STALE_EPOCH':
      cache.markCollectionStale(ns, wantedVersionOf(error), typeof error.details?.shard === 'string' ? error.details.shard : undefined);
      return true;
    case 'STALE_DB_VERSION':
      cache.markDatabaseStale(databaseOf(ns));
      return true;
    case 'SHARD_NOT_FOUND':
      cache.markCollectionStale(ns);
      cache.markDatabaseStale(databaseOf(ns));
      return true;
    default:
      return false;
  }
}

function databaseOf(ns: string): string {
  return ns.includes('.') ? ns.slice(0, ns.indexOf('.')) : ns;
}

function wantedVersionOf(error: TesseraError): ChunkVersion | undefined {
  const wanted = error.details?.wanted as ChunkVersion | undefined;
  return wanted !== null && wanted !== undefined && typeof wanted === 'object' && 'major' in wanted ? wanted : undefined;
}
