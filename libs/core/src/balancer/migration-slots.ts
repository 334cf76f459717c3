/**
 * Which shards may take part in one more migration, as the policies choose them. The
 * registry's invariants, as MongoDB's ActiveMigrationsRegistry keeps them, loosened on one
 * side only: a shard receives one migration at a time and then takes part in no other; a shard
 * may donate up to `maxDonations` migrations at once (MongoDB: 1), each of a different chunk to
 * a different recipient, and does not receive meanwhile. A range is in at most one migration:
 * the config server's `active_migrations` keeps one per chunk, and the policies never choose a
 * chunk of a migration under way.
 */
import type { ChunkRange } from '../ranges/chunk-range.js';
import type { ShardId } from '../routing/chunk.js';
import type { MigrationReason } from './distribution.js';

/** A migration issued and not ended: its chunk is still on `from` in a snapshot. */
export interface MigrationUnderWay {
  readonly namespace: string;
  readonly range: ChunkRange;
  readonly from: ShardId;
  readonly to: ShardId;
  /** Why it was issued: the rule its collection breaks until it lands (default `imbalance`). */
  readonly reason?: MigrationReason;
}

/** The migrations a round may still add, given those under way and those it chose so far. */
export class MigrationSlots {
  private readonly donating = new Map<ShardId, number>();
  private readonly receiving = new Set<ShardId>();

  /** `maxDonations` of at least 1; `Infinity` lets a donor serve every free recipient at once. */
  constructor(
    readonly maxDonations: number,
    readonly underWay: readonly MigrationUnderWay[] = [],
  ) {
    for (const m of underWay) this.take(m.from, m.to);
  }

  /** Whether `shard` may donate one more migration. */
  canDonate(shard: ShardId): boolean {
    return !this.receiving.has(shard) && (this.donating.get(shard) ?? 0) < this.maxDonations;
  }

  /** Whether `shard` may receive a migration: it takes part in none. */
  canReceive(shard: ShardId): boolean {
    return !this.receiving.has(shard) && !this.donating.has(shard);
  }

  /** Notes a migration chosen from `from` to `to`. */
  take(from: ShardId, to: ShardId): void {
    this.donating.set(from, (this.donating.get(from) ?? 0) + 1);
    this.receiving.add(to);
  }

  /** Every shard in a migration, whatever its role (for the policies that use a shard once). */
  involved(): Set<ShardId> {
    return new Set([...this.donating.keys(), ...this.receiving]);
  }
}
