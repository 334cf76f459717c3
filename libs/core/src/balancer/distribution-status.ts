/**
 * One collection's distribution as the chunk selection policy reads and changes it during a
 * round (MongoDB's DistributionStatus): its chunks in key order with their zones, each shard's
 * chunks, each shard's load per zone, and the migrations chosen so far with the shards they made
 * busy. The policy's named steps (drain, zone violations, balance within a zone) are small
 * helpers over it; a chosen migration moves its load at once, so later steps see it.
 */
import type { ShardId } from '../routing/chunk.js';
import type { ChunkSelectionSettings } from './balancer-settings.js';
import type { CollectionDistribution, MigrationPlan, MigrationReason, ShardStatistics, SizedChunk } from './distribution.js';
import { NO_ZONE, sortChunks, zoneOfRange } from './distribution.js';

/** The first rule a collection breaks (`balancerCollectionStatus`'s `firstComplianceViolation`). */
export type ComplianceViolation = 'draining' | 'zoneViolation' | 'chunksImbalance' | 'defragmentingChunks';

/**
 * One collection's distribution as the chunk selection steps read it (MongoDB's
 * DistributionStatus): its chunks in key order with their zones, each shard's chunks, and the
 * load per zone and shard, updated as migrations are chosen.
 */
export class DistributionStatus {
  readonly chunks: readonly SizedChunk[];
  /** The zone of each chunk of `chunks`, by index (`NO_ZONE` when in none). */
  readonly zoneOf: readonly string[];
  /** Each shard's chunk indexes, in key order. */
  readonly byShard = new Map<ShardId, number[]>();
  /** `configureCollectionBalancing(ns, { enableBalancing: false })`: judged, never moved. */
  readonly enabled: boolean;
  readonly isCountMode: boolean;
  violation: ComplianceViolation | undefined;
  jumboChunksSkipped = 0;
  /** Load per zone and shard: chunks in count modes, bytes in data-size mode. */
  private readonly loads = new Map<string, Map<ShardId, number>>();

  /** `busy` and `out` are shared by every collection of the round, and changed as migrations are chosen. */
  constructor(
    readonly shards: readonly ShardStatistics[],
    readonly collection: CollectionDistribution,
    readonly settings: ChunkSelectionSettings,
    readonly busy: Set<ShardId>,
    private readonly out: MigrationPlan[],
  ) {
    this.chunks = sortChunks(collection.chunks);
    this.zoneOf = this.chunks.map((c) => zoneOfRange(c.range, collection.zones));
    this.chunks.forEach((c, i) => {
      const list = this.byShard.get(c.shard);
      if (list) list.push(i);
      else this.byShard.set(c.shard, [i]);
    });
    this.enabled = collection.balancingEnabled !== false;
    this.isCountMode = settings.mode !== 'dataSize';
    // In data-size mode without zones the shards' reported sizes count, not the chunks' estimates.
    this.chunks.forEach((c, i) => this.addLoad(this.zoneOf[i] as string, c.shard, this.weight(c)));
    if (!this.isCountMode && collection.zones.length === 0) {
      for (const [shard, size] of Object.entries(collection.shardDataSizeBytes ?? {}))
        this.addLoad(NO_ZONE, shard, size - this.loadOf(shard, NO_ZONE));
    }
  }

  /** The load of `shard` in `zone`: chunks in count modes, bytes in data-size mode. */
  loadOf(shard: ShardId, zone: string): number {
    return this.loads.get(zone)?.get(shard) ?? 0;
  }

  /** The `i`-th chunk in key order. */
  chunkAt(i: number): SizedChunk {
    return this.chunks[i] as SizedChunk;
  }

  /** Notes the first rule the collection breaks; later ones do not replace it. */
  noteViolation(violation: ComplianceViolation): void {
    this.violation ??= violation;
  }

  /** The least loaded shard that may receive a chunk of `zone` from `donor` now, if any. */
  leastLoadedRecipient(zone: string, donor: ShardId): ShardId | undefined {
    return pickBy(
      this.shards.filter((s) => s.state === 'active' && s.id !== donor && !this.busy.has(s.id) && isInZone(s, zone)),
      (s) => this.loadOf(s.id, zone),
      'min',
    )?.id;
  }

  /**
   * Tries the chunks `indexes` in key order and chooses a migration of the first movable one
   * that `wanted` accepts (to `to`, else the least loaded recipient). Jumbo chunks are skipped
   * and counted. Answers whether it chose one.
   */
  moveOneOf(indexes: readonly number[], reason: MigrationReason, wanted: (i: number) => boolean, to?: ShardId): boolean {
    for (const i of indexes) {
      if (!wanted(i)) continue;
      const chunk = this.chunkAt(i);
      if (chunk.jumbo === true) {
        this.jumboChunksSkipped++;
        continue;
      }
      const recipient = to ?? this.leastLoadedRecipient(this.zoneOf[i] as string, chunk.shard);
      if (recipient === undefined) continue;
      this.choose(i, recipient, reason);
      return true;
    }
    return false;
  }

  private choose(i: number, to: ShardId, reason: MigrationReason): void {
    const chunk = this.chunkAt(i);
    this.out.push({
      namespace: this.collection.namespace,
      range: chunk.range,
      from: chunk.shard,
      to,
      reason,
      ...(chunk.estimatedSizeBytes === undefined ? {} : { estimatedSizeBytes: chunk.estimatedSizeBytes }),
    });
    this.busy.add(chunk.shard);
    this.busy.add(to);
    const zone = this.zoneOf[i] as string;
    this.addLoad(zone, chunk.shard, -this.weight(chunk));
    this.addLoad(zone, to, this.weight(chunk));
  }

  private weight(c: SizedChunk): number {
    return this.isCountMode ? 1 : (c.estimatedSizeBytes ?? 0);
  }

  private addLoad(zone: string, shard: ShardId, amount: number): void {
    const perShard = this.loads.get(zone) ?? new Map<ShardId, number>();
    perShard.set(shard, (perShard.get(shard) ?? 0) + amount);
    this.loads.set(zone, perShard);
  }
}

/** Whether `shard` may hold chunks of `zone` (every shard holds chunks in no zone). */
export function isInZone(shard: ShardStatistics, zone: string): boolean {
  return zone === NO_ZONE || shard.zones.includes(zone);
}

/** The shard with the least (or most) load; ties go to the smallest shard id. */
export function pickBy(
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
