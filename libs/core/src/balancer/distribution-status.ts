/**
 * One collection's distribution as the chunk selection policy reads and changes it during a
 * round (MongoDB's DistributionStatus): its chunks in key order with their zones, each shard's
 * chunks, each shard's load per zone, and the migrations chosen so far with the slots they
 * took. The policy's named steps (drain, zone violations, balance within a zone) are small
 * helpers over it; a chosen migration moves its load at once, so later steps see it.
 */
import { rangesEqual } from '../ranges/chunk-range.js';
import type { ShardId } from '../routing/chunk.js';
import type { ChunkSelectionSettings } from './balancer-settings.js';
import type { CollectionDistribution, MigrationPlan, MigrationReason, ShardStatistics, SizedChunk } from './distribution.js';
import { NO_ZONE, sortChunks, zoneOfRange } from './distribution.js';
import type { MigrationSlots } from './migration-slots.js';

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
  /** Jumbo chunks passed over, by index: a chunk tried by several steps counts once. */
  private readonly jumbos = new Set<number>();
  /** Load per zone and shard: chunks in count modes, bytes in data-size mode. */
  private readonly loads = new Map<string, Map<ShardId, number>>();
  /** Why each migration of this collection under way was issued, in the order given. */
  private readonly underWayReasons: MigrationReason[] = [];
  /** Chunks already chosen to move, by index: a donor serving several moves each chunk once. */
  private readonly chosen = new Set<number>();
  /** What a chunk of a shard weighs when it has no size estimate (see `sizeOf`). */
  private readonly unknownChunkBytes: ReadonlyMap<ShardId, number> = new Map();

  /** `slots` and `out` are shared by every collection of the round, and changed as migrations are chosen. */
  constructor(
    readonly shards: readonly ShardStatistics[],
    readonly collection: CollectionDistribution,
    readonly settings: ChunkSelectionSettings,
    readonly slots: MigrationSlots,
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
    this.unknownChunkBytes = unknownChunkBytesOf(this.chunks, collection.shardDataSizeBytes ?? {});
    this.chunks.forEach((c, i) => this.addLoad(this.zoneOf[i] as string, c.shard, this.weight(i)));
    // In data-size mode without zones the shards' reported sizes count, not the chunks' estimates.
    if (!this.isCountMode && collection.zones.length === 0) {
      for (const [shard, size] of Object.entries(collection.shardDataSizeBytes ?? {}))
        this.addLoad(NO_ZONE, shard, size - this.loadOf(shard, NO_ZONE));
    }
    // A chunk of a migration under way is still on its donor here: it is not chosen again, and
    // its load counts on its recipient already, as it will once the migration commits.
    for (const m of slots.underWay) {
      if (m.namespace !== collection.namespace) continue;
      const i = this.chunks.findIndex((c) => c.shard === m.from && rangesEqual(c.range, m.range));
      if (i === -1) continue;
      this.chosen.add(i);
      this.underWayReasons.push(m.reason ?? 'imbalance');
      this.addLoad(this.zoneOf[i] as string, m.from, -this.weight(i));
      this.addLoad(this.zoneOf[i] as string, m.to, this.weight(i));
    }
  }

  /** How many jumbo chunks the policy would have moved but skipped. */
  get jumboChunksSkipped(): number {
    return this.jumbos.size;
  }

  /** The load of `shard` in `zone`: chunks in count modes, bytes in data-size mode. */
  loadOf(shard: ShardId, zone: string): number {
    return this.loads.get(zone)?.get(shard) ?? 0;
  }

  /** The load of `shard` over every zone. */
  totalLoadOf(shard: ShardId): number {
    let total = 0;
    for (const perShard of this.loads.values()) total += perShard.get(shard) ?? 0;
    return total;
  }

  /**
   * The bytes of the `i`-th chunk as the data-size policy counts them: its estimate, else an equal
   * share of what its shard reports beyond its other chunks' estimates (a chunk has an estimate
   * once its shard measured it at an auto-split test; a split's pieces have none until theirs,
   * and a chunk never tested has none).
   */
  sizeOf(i: number): number {
    const chunk = this.chunkAt(i);
    return chunk.estimatedSizeBytes ?? this.unknownChunkBytes.get(chunk.shard) ?? 0;
  }

  /** The `i`-th chunk in key order. */
  chunkAt(i: number): SizedChunk {
    return this.chunks[i] as SizedChunk;
  }

  /** Notes the first rule the collection breaks; later ones do not replace it. */
  noteViolation(violation: ComplianceViolation): void {
    this.violation ??= violation;
  }

  /**
   * After the policy's steps: a collection with a migration under way is not compliant yet, even
   * when the steps, which count that migration as landed, find nothing to do. It breaks the rule
   * the first such migration was issued for.
   */
  noteMigrationsUnderWay(): void {
    const reason = this.underWayReasons[0];
    if (reason !== undefined) this.noteViolation(VIOLATION_OF_REASON[reason]);
  }

  /**
   * The least loaded shard in `zone` that may receive a chunk of it from `donor` now, if any; of
   * shards equally loaded in the zone, the least loaded over all zones (an empty new shard before
   * one that holds only other zones' data).
   */
  leastLoadedRecipient(zone: string, donor: ShardId): ShardId | undefined {
    const candidates = this.shards.filter(
      (s) => s.state === 'active' && s.id !== donor && this.slots.canReceive(s.id) && isInZone(s, zone),
    );
    const least = pickBy(candidates, (s) => this.loadOf(s.id, zone), 'min');
    if (least === undefined) return undefined;
    const tied = candidates.filter((s) => this.loadOf(s.id, zone) === this.loadOf(least.id, zone));
    return pickBy(tied, (s) => this.totalLoadOf(s.id), 'min')?.id;
  }

  /**
   * Tries the chunks `indexes` in key order and chooses a migration of the first movable one
   * not chosen yet that `wanted` accepts (to `to`, else the least loaded recipient). Jumbo chunks
   * are skipped and counted. Answers whether it chose one.
   */
  moveOneOf(indexes: readonly number[], reason: MigrationReason, wanted: (i: number) => boolean, to?: ShardId): boolean {
    for (const i of indexes) {
      if (this.chosen.has(i) || !wanted(i)) continue;
      const chunk = this.chunkAt(i);
      if (chunk.jumbo === true) {
        this.jumbos.add(i);
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
    const size = chunk.estimatedSizeBytes ?? this.unknownChunkBytes.get(chunk.shard);
    this.out.push({
      namespace: this.collection.namespace,
      range: chunk.range,
      from: chunk.shard,
      to,
      reason,
      ...(size === undefined ? {} : { estimatedSizeBytes: size }),
    });
    this.chosen.add(i);
    this.slots.take(chunk.shard, to);
    const zone = this.zoneOf[i] as string;
    this.addLoad(zone, chunk.shard, -this.weight(i));
    this.addLoad(zone, to, this.weight(i));
  }

  private weight(i: number): number {
    return this.isCountMode ? 1 : this.sizeOf(i);
  }

  private addLoad(zone: string, shard: ShardId, amount: number): void {
    const perShard = this.loads.get(zone) ?? new Map<ShardId, number>();
    perShard.set(shard, (perShard.get(shard) ?? 0) + amount);
    this.loads.set(zone, perShard);
  }
}

/** The rule a migration issued for `reason` mends. */
const VIOLATION_OF_REASON: Readonly<Record<MigrationReason, ComplianceViolation>> = {
  drain: 'draining',
  zoneViolation: 'zoneViolation',
  imbalance: 'chunksImbalance',
  topChunk: 'chunksImbalance',
  defragmentation: 'defragmentingChunks',
};

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

/**
 * What a chunk without a size estimate weighs on each shard: an equal share (in whole bytes) of
 * what the shard reports for the collection beyond the estimates of its other chunks.
 */
export function unknownChunkBytesOf(
  chunks: readonly SizedChunk[],
  shardDataSizeBytes: Readonly<Record<ShardId, number>>,
): Map<ShardId, number> {
  const shares = new Map<ShardId, number>();
  for (const [shard, size] of Object.entries(shardDataSizeBytes)) {
    const own = chunks.filter((c) => c.shard === shard);
    const unknown = own.filter((c) => c.estimatedSizeBytes === undefined).length;
    const known = own.reduce((n, c) => n + (c.estimatedSizeBytes ?? 0), 0);
    if (unknown > 0) shares.set(shard, Math.floor(Math.max(0, size - known) / unknown));
  }
  return shares;
}
