/**
 * The chunk selection policy (balancer-internals.md "ChunkSelectionPolicy"; MongoDB's
 * BalancerPolicy): given the shards, each collection's distribution and the shards already busy
 * this round, it returns the migrations of one balancer round and why, and the splits at zone
 * boundaries. Pure: a function of its arguments, ties broken by shard id.
 *
 * Priority per collection: chunks on draining shards, then chunks violating zones, then
 * imbalance. Every recipient is the least loaded shard still available: active (not draining),
 * in the chunk's zone, and in no other migration. A shard receives at most one migration and
 * donates at most `maxDonationsPerShard` (MongoDB: 1) at once, never both (`MigrationSlots`);
 * the caller passes the slots the migrations under way and defragmentation already use.
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
import { compareShardKeys } from '../ranges/chunk-range.js';
import type { ShardId } from '../routing/chunk.js';
import type { ChunkSelectionSettings } from './balancer-settings.js';
import type { CollectionDistribution, MigrationPlan, ShardStatistics, SplitPlan } from './distribution.js';
import { NO_ZONE, sortChunks } from './distribution.js';
import type { ComplianceViolation } from './distribution-status.js';
import { DistributionStatus, isInZone, pickBy } from './distribution-status.js';
import { MigrationSlots } from './migration-slots.js';

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
 * caller shuffles it with its `Random` if it wants MongoDB's fairness), each in a free slot of
 * `slots` (which it takes), and each collection's compliance.
 */
export function selectMigrations(
  shards: readonly ShardStatistics[],
  collections: readonly CollectionDistribution[],
  settings: ChunkSelectionSettings,
  slots: MigrationSlots = new MigrationSlots(settings.maxDonationsPerShard ?? 1),
): ChunkSelectionResult {
  const migrations: MigrationPlan[] = [];
  const statuses = collections.map((collection) => selectCollectionMigrations(shards, collection, settings, slots, migrations));
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

/**
 * One collection's migrations, in the reference's priority order, each step a helper over the
 * collection's `DistributionStatus`: drain, zone violations, then balance within each zone.
 */
function selectCollectionMigrations(
  shards: readonly ShardStatistics[],
  collection: CollectionDistribution,
  settings: ChunkSelectionSettings,
  slots: MigrationSlots,
  out: MigrationPlan[],
): CollectionBalanceStatus {
  const status = new DistributionStatus(shards, collection, settings, slots, out);
  selectDrainMigrations(status);
  selectZoneViolationMigrations(status);
  const inProgress = selectImbalanceMigrations(status);
  status.noteMigrationsUnderWay();
  return {
    namespace: collection.namespace,
    balancerCompliant: status.violation === undefined,
    ...(status.violation === undefined ? {} : { firstComplianceViolation: status.violation }),
    jumboChunksSkipped: status.jumboChunksSkipped,
    chunkCountBalancingInProgress: inProgress,
  };
}

/** 1. Each draining shard gives its first movable chunks away, whatever their zone, as many as it may donate. */
export function selectDrainMigrations(status: DistributionStatus): void {
  for (const shard of status.shards) {
    const indexes = status.byShard.get(shard.id) ?? [];
    if (shard.state !== 'draining' || indexes.length === 0) continue;
    status.noteViolation('draining');
    while (status.enabled && status.slots.canDonate(shard.id) && status.moveOneOf(indexes, 'drain', () => true));
  }
}

/** 2. Each active shard gives away its first chunks of a zone it is not in, as many as it may donate. */
export function selectZoneViolationMigrations(status: DistributionStatus): void {
  for (const shard of status.shards) {
    if (shard.state === 'draining') continue;
    const indexes = status.byShard.get(shard.id) ?? [];
    const violates = (i: number): boolean => !isInZone(shard, status.zoneOf[i] as string);
    if (!indexes.some(violates)) continue;
    status.noteViolation('zoneViolation');
    while (status.enabled && status.slots.canDonate(shard.id) && status.moveOneOf(indexes, 'zoneViolation', violates));
  }
}

/**
 * 3. Imbalance, zone by zone among the active shards of the zone (all active shards for chunks
 * in no zone). Answers whether, in `chunkCountThreshold` mode, a zone is still being balanced.
 */
export function selectImbalanceMigrations(status: DistributionStatus): boolean {
  let inProgress = false;
  const zones = [NO_ZONE, ...new Set(status.collection.zones.map((z) => z.zone))];
  for (const zone of zones) {
    const members = status.shards.filter((s) => s.state === 'active' && isInZone(s, zone));
    if (members.length < 2) continue;
    const zoneChunks = status.zoneOf.filter((z) => z === zone).length;
    const started = isImbalanced(status, members, zone, zoneChunks);
    if (started) status.noteViolation('chunksImbalance');
    if (started && status.enabled) balanceZone(status, members, zone, zoneChunks);
    if (status.settings.mode === 'chunkCountThreshold') {
      const loads = members.map((s) => status.loadOf(s.id, zone));
      if (Math.max(...loads) - Math.min(...loads) >= 2) inProgress = true;
    }
  }
  return inProgress;
}

/**
 * Moves chunks of `zone` from its most loaded member to its least loaded one while that still
 * improves the balance; a donor with no chunk that fits is passed over.
 */
function balanceZone(status: DistributionStatus, members: readonly ShardStatistics[], zone: string, zoneChunks: number): void {
  const exhausted = new Set<ShardId>();
  for (;;) {
    const donor = pickBy(
      members.filter((s) => status.slots.canDonate(s.id) && !exhausted.has(s.id)),
      (s) => status.loadOf(s.id, zone),
      'max',
    );
    const to = donor && status.leastLoadedRecipient(zone, donor.id);
    if (donor === undefined || to === undefined) break;
    const from = status.loadOf(donor.id, zone);
    if (!shouldMove(status, from, status.loadOf(to, zone), zoneChunks, members.length)) break;
    // A chunk at least as large as the difference would only swap the roles of the two shards.
    const gap = from - status.loadOf(to, zone);
    const fits = (i: number): boolean => status.zoneOf[i] === zone && (status.isCountMode || status.sizeOf(i) < gap);
    if (!status.moveOneOf(status.byShard.get(donor.id) ?? [], 'imbalance', fits, to)) exhausted.add(donor.id);
  }
}

/** Whether a zone is out of balance before this round's moves. */
function isImbalanced(status: DistributionStatus, members: readonly ShardStatistics[], zone: string, zoneChunks: number): boolean {
  const { settings, collection } = status;
  const loads = members.map((s) => status.loadOf(s.id, zone));
  const max = Math.max(...loads);
  const min = Math.min(...loads);
  switch (settings.mode) {
    case 'dataSize':
      return max - min > settings.imbalanceThresholdChunks * collection.maxChunkSizeBytes;
    case 'chunkCountOptimal':
      return max - optimalChunkCount(zoneChunks, members.length) > 1;
    case 'chunkCountThreshold':
      return max - min >= (collection.chunkCountBalancingInProgress === true ? 2 : migrationThreshold(status.chunks.length));
  }
}

/** Whether moving one chunk from a donor at `from` to a recipient at `to` still improves balance. */
function shouldMove(status: DistributionStatus, from: number, to: number, zoneChunks: number, memberCount: number): boolean {
  const { settings, collection } = status;
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
