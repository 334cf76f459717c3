import { TesseraError } from '@tessera/core';
import type { CreateIndexesResult, DropIndexesResult } from '@tessera/protocol';

/** MongoDB's createIndexes answer. */
export interface CreateIndexesResponse {
  numIndexesBefore: number;
  numIndexesAfter: number;
  createdCollectionAutomatically?: true;
  ok: 1;
}

/**
 * One answer from the shards' answers to a broadcast createIndexes: the fewest indexes any
 * shard had before, the most any has after (a shard that already had the index counts it
 * before), and `createdCollectionAutomatically` when a shard created the collection.
 */
export function mergeCreateIndexesReplies(replies: readonly CreateIndexesResult[]): CreateIndexesResponse {
  if (replies.length === 0) throw new TesseraError('INTERNAL', 'createIndexes reached no shard');
  return {
    numIndexesBefore: Math.min(...replies.map((r) => r.numIndexesBefore)),
    numIndexesAfter: Math.max(...replies.map((r) => r.numIndexesAfter)),
    ...(replies.some((r) => r.createdCollectionAutomatically) ? { createdCollectionAutomatically: true as const } : {}),
    ok: 1,
  };
}

/** A shard's answer to a dropIndexes: its count, or the error it gave. */
export type DropReply = { shard: string; reply: DropIndexesResult } | { shard: string; error: TesseraError };

/**
 * One answer from a broadcast dropIndexes. A shard without the collection (`nIndexesWas: 0`) or
 * without the index (`NOT_FOUND`, e.g. it dropped it in an earlier round of a retry) does not
 * fail the command when another shard dropped it; when none did, the index was not found
 * (`NOT_FOUND`), or the collection does not exist (`NAMESPACE_NOT_FOUND`). Other errors win.
 */
export function mergeDropIndexesReplies(
  ns: string,
  name: string,
  replies: readonly DropReply[],
  droppedBefore: boolean,
): { nIndexesWas: number; ok: 1 } {
  const failure = replies.find((r) => 'error' in r && r.error.code !== 'NOT_FOUND');
  if (failure !== undefined && 'error' in failure) throw failure.error;
  const counts = replies.flatMap((r) => ('reply' in r && r.reply.nIndexesWas > 0 ? [r.reply.nIndexesWas] : []));
  if (counts.length > 0 || droppedBefore) return { nIndexesWas: Math.max(0, ...counts), ok: 1 };
  const notFound = replies.find((r) => 'error' in r);
  if (notFound !== undefined && 'error' in notFound) throw notFound.error;
  throw new TesseraError('NAMESPACE_NOT_FOUND', `ns not found: ${ns}`, { details: { ns, index: name } });
}
