import { rangesEqual } from '../ranges/chunk-range.js';
import type { ShardId } from '../routing/chunk.js';
import type { ChunkSelectionSettings } from './balancer-settings.js';
import type { CollectionDistribution, MigrationPlan, ShardStatistics, SizedChunk } from './distribution.js';
import { NO_ZONE, zoneOfRange } from './distribution.js';
import { pickBy } from './distribution-status.js';

/** The answer to a shard's request to move the top chunk it just split off. */
export type TopChunkDecision =
  | { readonly move: MigrationPlan }
  | { readonly skip: 'notAChunk' | 'jumbo' | 'balancingDisabled' | 'donorBusy' | 'donorIsLeastLoaded' | 'noRecipient' };

/**
 * The top-chunk optimization's move (sharding-internals.md "Top Chunk Optimization"; MongoDB's
 * `BalancerPolicy::balanceSingleChunk`): the chunk `range` of `collection`, just split off the
 * edge of the key space, goes to the least loaded active shard of its zone that is not busy, in
 * the unit of `settings.mode` (bytes, or chunks). When its own shard is the least loaded, or ties
 * with it, it stays: moving it would only make its recipient the hot spot.
 */
export function selectTopChunkMigration(
  shards: readonly ShardStatistics[],
  collection: CollectionDistribution,
  range: SizedChunk['range'],
  settings: ChunkSelectionSettings,
  busyShards: ReadonlySet<ShardId> = new Set(),
): TopChunkDecision {
  if (collection.balancingEnabled === false) return { skip: 'balancingDisabled' };
  const chunk = collection.chunks.find((c) => rangesEqual(c.range, range));
  if (chunk === undefined) return { skip: 'notAChunk' };
  if (chunk.jumbo === true) return { skip: 'jumbo' };
  // The donor is in another migration already: a top chunk's move takes one shard once (MongoDB's rule).
  if (busyShards.has(chunk.shard)) return { skip: 'donorBusy' };
  const zone = zoneOfRange(chunk.range, collection.zones);
  const isCountMode = settings.mode !== 'dataSize';
  const load = new Map<ShardId, number>();
  for (const c of collection.chunks) {
    if (zoneOfRange(c.range, collection.zones) !== zone) continue;
    load.set(c.shard, (load.get(c.shard) ?? 0) + (isCountMode ? 1 : (c.estimatedSizeBytes ?? 0)));
  }
  if (!isCountMode && collection.zones.length === 0)
    for (const [shard, size] of Object.entries(collection.shardDataSizeBytes ?? {})) load.set(shard, size);
  const candidates = shards.filter((s) => s.state === 'active' && (zone === NO_ZONE || s.zones.includes(zone)) && !busyShards.has(s.id));
  const recipient = pickBy(
    candidates.filter((s) => s.id !== chunk.shard),
    (s) => load.get(s.id) ?? 0,
    'min',
  );
  if (recipient === undefined) return { skip: 'noRecipient' };
  if ((load.get(chunk.shard) ?? 0) <= (load.get(recipient.id) ?? 0)) return { skip: 'donorIsLeastLoaded' };
  return {
    move: {
      namespace: collection.namespace,
      range: chunk.range,
      from: chunk.shard,
      to: recipient.id,
      reason: 'topChunk',
      ...(chunk.estimatedSizeBytes === undefined ? {} : { estimatedSizeBytes: chunk.estimatedSizeBytes }),
    },
  };
}
