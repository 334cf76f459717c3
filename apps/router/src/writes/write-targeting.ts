/**
 * Which shards a write statement goes to (reference "Query Isolation"), from the routing of
 * its collection. Pure.
 *
 * - insert: the shard owning the document's shard key (`extractShardKey` + `chunkFor`), read
 *   from the document as it came.
 * - multi update / delete with `limit: 0`: every shard `targetShards` names for the filter.
 * - single update (`multi: false`), delete with `limit: 1`, findAndModify: they must reach
 *   exactly one shard, or two shards could each change "the one" document. The full shard key
 *   by equality gives that shard. Without it (`isWriteWithoutShardKey`) the router first reads
 *   one matching document's `_id` and shard key, then writes with `targetDocumentFilter`, which
 *   holds the full key: MongoDB 7.0's write without shard key (`WriteWithoutShardKeyService`).
 * - upsert: the full shard key by equality is required, since the inserted document takes its
 *   shard key from the filter (MongoDB 8.0's rule); otherwise `SHARD_KEY_NOT_FOUND`.
 * - under a collation, a filter targets as above only when its shard key values hold no string
 *   (`writeTargetingFilter`).
 * - an unsharded collection: its database's primary shard, always.
 */
import {
  type Chunk,
  type Collation,
  type ClusterTimestamp,
  compareShardKeys,
  type RoutingTable,
  type ShardKeyPattern,
  TesseraError,
  type Value,
  type ValueObject,
  compareClusterTimestamps,
  extractShardKeyFromWire,
  shardKeyFromEqualityQuery,
  shardKeyPatternToObject,
  valueAtPath,
} from '@tessera/core';
import { isDocument, keyRangesForFilter, targetShards, validateFilter } from '@tessera/query';

/** How a collection is routed, reduced to what targeting needs. */
export type WriteRouting =
  | { readonly kind: 'sharded'; readonly ns: string; readonly table: RoutingTable; readonly pattern: ShardKeyPattern }
  | { readonly kind: 'unsharded'; readonly ns: string; readonly primaryShard: string };

/**
 * The shard an insert goes to, from the document as it came (Extended JSON): only the top-level
 * fields its shard key reads are decoded. A document decodes field by field, so this is the key
 * the shard extracts from the whole decoded document. Throws `BAD_VALUE` when a shard key field
 * holds an array or a regex, `FAILED_TO_PARSE` when it holds a malformed Extended JSON wrapper.
 */
export function routeInsert(document: Readonly<Record<string, unknown>>, routing: WriteRouting): string {
  if (routing.kind === 'unsharded') return routing.primaryShard;
  return routing.table.shardFor(extractShardKeyFromWire(routing.pattern, document));
}

/**
 * The shards a filter reaches (the owners at `atClusterTime` when given: a snapshot read); used by
 * multi-writes and reads. Throws `BAD_VALUE` for an invalid filter, `STALE_CHUNK_HISTORY` when a
 * chunk's placement history does not reach back to `atClusterTime`.
 */
export function routeFilter(filter: unknown, routing: WriteRouting, atClusterTime?: ClusterTimestamp): string[] {
  if (routing.kind === 'unsharded') {
    validateFilter(filter, '');
    return [routing.primaryShard];
  }
  return targetShards(routing.table, routing.pattern, filter, atClusterTime).shards;
}

/** What a statement needs from targeting. */
export interface WriteShape {
  readonly filter: unknown;
  /** True for a single-document write (`multi: false`, `limit: 1`, findAndModify). */
  readonly single: boolean;
  readonly upsert: boolean;
  /** Names the operation in messages, e.g. "update", "delete", "findAndModify". */
  readonly operation: string;
  /** The statement's collation; none compares strings by bytes, as the shard key's order does. */
  readonly collation?: Collation | undefined;
}

/**
 * The filter a write targets shards by. Under a collation, a string the filter pins the shard key
 * to may equal strings anywhere in the key's byte order, so the filter targets only when it pins
 * the full shard key to values that hold no string, and otherwise reaches every shard (MongoDB's
 * rule: the collation must be irrelevant to the shard key's values).
 */
export function writeTargetingFilter(shape: WriteShape, routing: WriteRouting): ValueObject {
  const filter = validateFilter(shape.filter, '');
  if (shape.collation === undefined || routing.kind === 'unsharded') return filter;
  const key = shardKeyFromEqualityQuery(routing.pattern, filter);
  return key !== undefined && !key.some(holdsString) ? filter : {};
}

function holdsString(value: Value): boolean {
  if (typeof value === 'string') return true;
  if (Array.isArray(value)) return value.some(holdsString);
  return isDocument(value) && Object.values(value).some(holdsString);
}

/**
 * The shards an update, delete or findAndModify goes to (see the module comment); empty when
 * no document can match. Throws `SHARD_KEY_NOT_FOUND` or `BAD_VALUE`.
 */
export function routeWrite(shape: WriteShape, routing: WriteRouting): string[] {
  const filter = writeTargetingFilter(shape, routing);
  if (routing.kind === 'unsharded') return [routing.primaryShard];
  if (!shape.single && !shape.upsert) return targetShards(routing.table, routing.pattern, filter).shards;
  const key = shardKeyFromEqualityQuery(routing.pattern, filter);
  if (key !== undefined) return [routing.table.shardFor(key)];
  throw shardKeyNotFound(shape, routing);
}

/**
 * True for a single-document write on a sharded collection whose filter does not hold the full
 * shard key by equality, an upsert excepted (it is refused): it runs as a write without shard
 * key. Decided by the filter alone, not by where its ranges fall today, so a chunk that splits or
 * moves between a try and its retry cannot turn a routable write into a refused one.
 */
export function isWriteWithoutShardKey(shape: WriteShape, routing: WriteRouting): boolean {
  if (routing.kind === 'unsharded' || !shape.single || shape.upsert) return false;
  let filter: ValueObject;
  try {
    filter = writeTargetingFilter(shape, routing);
  } catch {
    return false; // refused by `routeWrite`, as a write error of its statement
  }
  return shardKeyFromEqualityQuery(routing.pattern, filter) === undefined;
}

/** What the read phase of a write without shard key projects: `_id` and the shard key's fields. */
export function targetDocumentProjection(pattern: ShardKeyPattern): Record<string, 1> {
  return Object.fromEntries([['_id', 1], ...pattern.fields.map((f) => [f.path, 1])]) as Record<string, 1>;
}

/**
 * The write phase's filter: the document the read phase found, by `_id` and full shard key (a
 * missing key field is null, as the shard key extraction reads it), and the statement's own
 * filter, so a document changed since it was read no longer matches.
 */
export function targetDocumentFilter(pattern: ShardKeyPattern, target: ValueObject, filter: ValueObject): ValueObject {
  const narrowed: Record<string, Value> = { _id: target['_id'] ?? null };
  for (const { path } of pattern.fields) narrowed[path] = valueAtPath(target, path) ?? null;
  return { ...narrowed, $and: [filter] };
}

function shardKeyNotFound(shape: WriteShape, routing: WriteRouting & { kind: 'sharded' }): TesseraError {
  const keyPattern = shardKeyPatternToObject(routing.pattern);
  return new TesseraError(
    'SHARD_KEY_NOT_FOUND',
    `Failed to target an upsert (${shape.operation}) on sharded collection ${routing.ns}: could not extract the exact shard key ${JSON.stringify(keyPattern)} from the filter. ` +
      'An upsert on a sharded collection needs every shard key field by equality' +
      (shape.collation === undefined ? '.' : ', and under a collation values that hold no string.'),
    { details: { namespace: routing.ns, shardKey: keyPattern } },
  );
}

/**
 * A transaction writes to the documents' current owners but reads them at its snapshot, so
 * every chunk a write reaches (by its filter, or an insert's document) must have had its current
 * owner since the snapshot: otherwise the owner's view of that time lacks the documents (they
 * moved in later) or the write would land on orphans (they moved out). Throws `STALE_CONFIG`
 * (MongoDB's MigrationConflict; a transient error in a transaction) when a chunk moved after
 * `atClusterTime`.
 */
export function checkUnmovedSince(
  routing: WriteRouting,
  reach: { filter: unknown } | { document: Readonly<Record<string, unknown>> },
  atClusterTime: ClusterTimestamp,
): void {
  if (routing.kind === 'unsharded') return;
  const chunks =
    'document' in reach
      ? [routing.table.chunkFor(extractShardKeyFromWire(routing.pattern, reach.document))]
      : chunksForFilter(routing.table, routing.pattern, reach.filter);
  for (const chunk of chunks) {
    const since = chunk.history[0]?.validAfter;
    if (since === undefined || compareClusterTimestamps(since, atClusterTime) > 0) {
      throw new TesseraError(
        'STALE_CONFIG',
        `a chunk of ${routing.ns} this transaction writes to moved after the transaction's snapshot; retry the transaction`,
        { details: { namespace: routing.ns }, retryable: false },
      );
    }
  }
}

/** The chunks a filter's key ranges reach (as `shardsForKeyRanges` reads the ranges: a longer max holds one point). */
function chunksForFilter(table: RoutingTable, pattern: ShardKeyPattern, filter: unknown): Chunk[] {
  const n = pattern.fields.length;
  const chunks: Chunk[] = [];
  for (const range of keyRangesForFilter(pattern, validateFilter(filter, ''))) {
    const min = range.min.slice(0, n);
    const max = range.max.slice(0, n);
    if (compareShardKeys(min, max) < 0) chunks.push(...table.chunksOverlapping({ min, max }));
    if (range.max.length > n) chunks.push(table.chunkFor(max));
  }
  return chunks;
}
