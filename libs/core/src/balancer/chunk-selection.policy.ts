/**
 * The chunk selection policy (balancer-internals.md "ChunkSelectionPolicy"; MongoDB's
 * BalancerPolicy): given the shards, each collection's distribution and the shards already busy
 * this round, it returns the migrations of one balancer round and why, and the splits at zone
 * boundaries. Pure: a function of its arguments, ties broken by shard id.
 *
 * Priority per collection: chunks on draining shards, then chunks violating zones, then
 * imbalance. Every recipient is the least loaded shard still available: active (not draining),
 * in the chunk's zone, and in no other migration of this round. A shard takes part in at most
 * one migration per round, so the caller passes the shards defragmentation already uses.
 * Jumbo chunks are never selected.
 *
 * Imbalance is judged zone by zone among the active shards of the zone (all active shards for
 * chunks in no zone). Load is bytes in `dataSize` mode (the shards' reported sizes when the
 * collection has no zones, else the chunks' sizes in that zone) and chunks of the zone in the
 * chunk-count modes. The donor is the most loaded shard, its first movable chunk of the zone in
 * key order moves; in `dataSize` mode only a chunk smaller than the donor-recipient difference,
 * since a larger one would just swap their roles (Tessera moves whole chunks, not MongoDB's
 * `moveRange` of up to the max chunk size).
 */
import type { ShardKey } from '../keys/shard-key-pattern.js';
import { compareShardKeys, rangesEqual } from '../ranges/chunk-range.js';
import type { ShardId } from '../routing/chunk.js';
import type { ChunkSelectionSettings } from './balancer-settings.js';
import type { CollectionDistribution, MigrationPlan, MigrationReason, ShardStatistics, SizedChunk, SplitPlan } from './distribution.js';
import { NO_ZONE, sortChunks, zoneOfRange } from './distribution.js';

/** The first rule a collection breaks (`balancerCollectionStatus`'s `firstComplianceViolation`). */
export type ComplianceViolation = 'draining' | 'zoneViolation' | 'chunksImbalance' | 'defragmentingChunks';

/** What the policy found for one collection, whether or not it could move anything. */
export interface CollectionBalanceStatus {
  readonly namespace: string;
  readonly balancerCompliant: boolean;
  readonly firstComplianceViolation?: ComplianceViolation;
  /** Jumbo chunks that would have been moved but were skipped. */
  readonly jumboChunksSkipped: number;
  /** `chunkCountThreshold` mode: still unbalanced after this round's moves; pass it back next round. */
  readonly chunkCountBalancingInProgress: boolean;
}

/** The output of one round of the policy. */
export interface ChunkSelectionResult {
  readonly migrations: readonly MigrationPlan[];
  readonly collections: readonly CollectionBalanceStatus[];
}

/**
 * The migration threshold of sharded-cluster-internals-manual.rst ("Migration Thresholds"):
 * fewer than 20 chunks 2, 20–79 chunks 4, 80 and more 8.
 */
export function migrationThreshold(totalChunks: number): 2 | 4 | 8 {
  if (totalChunks < 20) return 2;
  if (totalChunks < 80) return 4;
  return 8;
}

/** The optimal chunk count per shard of balancer-manual.rst: total ÷ shards, rounded up. */
export function optimalChunkCount(totalChunks: number, shardCount: number): number {
  return shardCount === 0 ? 0 : Math.ceil(totalChunks / shardCount);
}

/**
 * Returns the migrations of one balancer round over `collections`, in the given order (the
 * caller shuffles it with its `Random` if it wants MongoDB's fairness), never using a shard of
 * `busyShards` or one shard twice, and each collection's compliance.
 */
export function selectMigrations(
  shards: readonly ShardStatistics[],
  collections: readonly CollectionDistribution[],
  settings: ChunkSelectionSettings,
  busyShards: ReadonlySet<ShardId> = new Set(),
): ChunkSelectionResult {
  const busy = new Set(busyShards);
  const migrations: MigrationPlan[] = [];
  const statuses = collections.map((collection) => selectCollectionMigrations(shards, collection, settings, busy, migrations));
  return { migrations, collections: statuses };
}

/**
 * Returns the splits that make every chunk lie inside or outside each zone range: a chunk that
 * straddles a zone boundary is split at every boundary strictly inside it.
 */
export function selectZoneBoundarySplits(collection: CollectionDistribution): SplitPlan[] {
  const bounds = collection.zones.flatMap((z) => [z.range.min, z.range.max]).sort(compareShardKeys);
  const plans: SplitPlan[] = [];
  for (const chunk of sortChunks(collection.chunks)) {
    const points: ShardKey[] = [];
    for (const b of bounds) {
      if (compareShardKeys(chunk.range.min, b) < 0 && compareShardKeys(b, chunk.range.max) < 0) {
        const last = points[points.length - 1];
        if (last === undefined || compareShardKeys(last, b) !== 0) points.push(b);
      }
    }
    if (points.length > 0)
      plans.push({ namespace: collection.namespace, shard: chunk.shard, range: chunk.range, splitPoints: points, reason: 'zoneBoundary' });
  }
  return plans;
}

/** Per-shard load in the unit of the mode: bytes, or chunks of one zone. */
type Loads = Map<ShardId, number>;

function selectCollectionMigrations(
  shards: readonly ShardStatistics[],
  collection: CollectionDistribution,
  settings: ChunkSelectionSettings,
  busy: Set<ShardId>,
  out: MigrationPlan[],
): CollectionBalanceStatus {
  const chunks = sortChunks(collection.chunks);
  const zoneOf = chunks.map((c) => zoneOfRange(c.range, collection.zones));
  const byShard = new Map<ShardId, number[]>();
  chunks.forEach((c, i) => {
    const list = byShard.get(c.shard);
    if (list) list.push(i);
    else byShard.set(c.shard, [i]);
  });
  const isCountMode = settings.mode !== 'dataSize';
  // Load per zone and shard: chunks in count modes, bytes in data-size mode (the shards' reported
  // sizes when the collection has no zones, else the chunks' sizes zone by zone).
  const loads = new Map<string, Loads>();
  const addLoad = (zone: string, shard: ShardId, amount: number): void => {
    const perShard = loads.get(zone) ?? new Map<ShardId, number>();
    perShard.set(shard, (perShard.get(shard) ?? 0) + amount);
    loads.set(zone, perShard);
  };
  const weight = (c: SizedChunk): number => (isCountMode ? 1 : (c.estimatedSizeBytes ?? 0));
  chunks.forEach((c, i) => addLoad(zoneOf[i] as string, c.shard, weight(c)));
  if (!isCountMode && collection.zones.length === 0) {
    for (const [shard, size] of Object.entries(collection.shardDataSizeBytes ?? {}))
      addLoad(NO_ZONE, shard, size - (loads.get(NO_ZONE)?.get(shard) ?? 0));
  }
  const loadOf = (shard: ShardId, zone: string): number => loads.get(zone)?.get(shard) ?? 0;
  const moveLoad = (chunk: SizedChunk, zone: string, to: ShardId): void => {
    addLoad(zone, chunk.shard, -weight(chunk));
    addLoad(zone, to, weight(chunk));
  };

  const inZone = (s: ShardStatistics, zone: string): boolean => zone === NO_ZONE || s.zones.includes(zone);
  const leastLoadedRecipient = (zone: string, donor: ShardId): ShardId | undefined =>
    pickBy(
      shards.filter((s) => s.state === 'active' && s.id !== donor && !busy.has(s.id) && inZone(s, zone)),
      (s) => loadOf(s.id, zone),
      'min',
    )?.id;

  let violation: ComplianceViolation | undefined;
  let jumboChunksSkipped = 0;
  const enabled = collection.balancingEnabled !== false;
  const plan = (i: number, to: ShardId, reason: MigrationReason): void => {
    const chunk = chunks[i] as SizedChunk;
    out.push({
      namespace: collection.namespace,
      range: chunk.range,
      from: chunk.shard,
      to,
      reason,
      ...(chunk.estimatedSizeBytes === undefined ? {} : { estimatedSizeBytes: chunk.estimatedSizeBytes }),
    });
    busy.add(chunk.shard);
    busy.add(to);
    moveLoad(chunk, zoneOf[i] as string, to);
  };
  /** Tries the donor's chunks in key order; moves the first movable one. Returns whether it did. */
  const moveOneOf = (indexes: readonly number[], reason: MigrationReason, wanted: (i: number) => boolean, to?: ShardId): boolean => {
    for (const i of indexes) {
      if (!wanted(i)) continue;
      if ((chunks[i] as SizedChunk).jumbo === true) {
        jumboChunksSkipped++;
        continue;
      }
      const recipient = to ?? leastLoadedRecipient(zoneOf[i] as string, (chunks[i] as SizedChunk).shard);
      if (recipient === undefined) continue;
      plan(i, recipient, reason);
      return true;
    }
    return false;
  };

  // 1. Draining shards give every chunk away, whatever its zone.
  for (const shard of shards) {
    const indexes = byShard.get(shard.id) ?? [];
    if (shard.state !== 'draining' || indexes.length === 0) continue;
    violation ??= 'draining';
    if (enabled && !busy.has(shard.id)) moveOneOf(indexes, 'drain', () => true);
  }

  // 2. Chunks of a zone on a shard outside that zone.
  for (const shard of shards) {
    if (shard.state === 'draining') continue;
    const indexes = byShard.get(shard.id) ?? [];
    const violates = (i: number): boolean => !inZone(shard, zoneOf[i] as string);
    if (!indexes.some(violates)) continue;
    violation ??= 'zoneViolation';
    if (enabled && !busy.has(shard.id)) moveOneOf(indexes, 'zoneViolation', violates);
  }

  // 3. Imbalance, zone by zone, among the active shards of the zone.
  let inProgress = false;
  const zones = [NO_ZONE, ...new Set(collection.zones.map((z) => z.zone))];
  for (const zone of zones) {
    const members = shards.filter((s) => s.state === 'active' && inZone(s, zone));
    if (members.length < 2) continue;
    const zoneChunks = zoneOf.filter((z) => z === zone).length;
    const started = isImbalanced(settings, collection, members, zone, loadOf, zoneChunks, chunks.length);
    if (started) violation ??= 'chunksImbalance';
    if (!started || !enabled) continue;
    const exhausted = new Set<ShardId>();
    for (;;) {
      const donor = pickBy(
        members.filter((s) => !busy.has(s.id) && !exhausted.has(s.id)),
        (s) => loadOf(s.id, zone),
        'max',
      );
      const to = donor && leastLoadedRecipient(zone, donor.id);
      if (donor === undefined || to === undefined) break;
      if (!shouldMove(settings, collection, loadOf(donor.id, zone), loadOf(to, zone), zoneChunks, members.length)) break;
      // A chunk at least as large as the difference would only swap the roles of the two shards.
      const gap = loadOf(donor.id, zone) - loadOf(to, zone);
      const fits = (i: number): boolean => zoneOf[i] === zone && (isCountMode || ((chunks[i] as SizedChunk).estimatedSizeBytes ?? 0) < gap);
      const moved = moveOneOf(byShard.get(donor.id) ?? [], 'imbalance', fits, to);
      if (!moved) exhausted.add(donor.id);
    }
    if (settings.mode === 'chunkCountThreshold') {
      const loads = members.map((s) => loadOf(s.id, zone));
      if (Math.max(...loads) - Math.min(...loads) >= 2) inProgress = true;
    }
  }

  return {
    namespace: collection.namespace,
    balancerCompliant: violation === undefined,
    ...(violation === undefined ? {} : { firstComplianceViolation: violation }),
    jumboChunksSkipped,
    chunkCountBalancingInProgress: inProgress,
  };
}

/** Whether a zone is out of balance before this round's moves. */
function isImbalanced(
  settings: ChunkSelectionSettings,
  collection: CollectionDistribution,
  members: readonly ShardStatistics[],
  zone: string,
  loadOf: (shard: ShardId, zone: string) => number,
  zoneChunks: number,
  totalChunks: number,
): boolean {
  const loads = members.map((s) => loadOf(s.id, zone));
  const max = Math.max(...loads);
  const min = Math.min(...loads);
  switch (settings.mode) {
    case 'dataSize':
      return max - min > settings.imbalanceThresholdChunks * collection.maxChunkSizeBytes;
    case 'chunkCountOptimal':
      return max - optimalChunkCount(zoneChunks, members.length) > 1;
    case 'chunkCountThreshold':
      return max - min >= (collection.chunkCountBalancingInProgress === true ? 2 : migrationThreshold(totalChunks));
  }
}

/** Whether moving one chunk from a donor at `from` to a recipient at `to` still improves balance. */
function shouldMove(
  settings: ChunkSelectionSettings,
  collection: CollectionDistribution,
  from: number,
  to: number,
  zoneChunks: number,
  memberCount: number,
): boolean {
  switch (settings.mode) {
    case 'dataSize':
      return from - to > settings.imbalanceThresholdChunks * collection.maxChunkSizeBytes;
    case 'chunkCountOptimal':
      return from - optimalChunkCount(zoneChunks, memberCount) > 1 && to < from - 1;
    case 'chunkCountThreshold':
      // Once a collection is being balanced, it goes on until no two shards differ by 2 or more.
      return from - to >= 2;
  }
}

/** The shard with the least (or most) load; ties go to the smallest shard id. */
function pickBy(
  shards: readonly ShardStatistics[],
  load: (s: ShardStatistics) => number,
  which: 'min' | 'max',
): ShardStatistics | undefined {
  let best: ShardStatistics | undefined;
  let bestLoad = 0;
  for (const s of shards) {
    const l = load(s);
    const better = best === undefined || (which === 'min' ? l < bestLoad : l > bestLoad) || (l === bestLoad && s.id < best.id);
    if (better) {
      best = s;
      bestLoad = l;
    }
  }
  return best;
}

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
  // The donor is in another migration already (a shard takes part in one at a time).
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
