import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import {
  type MigrationPlan,
  type ShardKey,
  type SplitPlan,
  TesseraError,
  decideOnChunkTooBig,
  selectZoneBoundarySplits,
} from '@tessera/core';
import { chunkRangeToWire, shardKeyFromWire, shardKeyToWire } from '@tessera/protocol';
import { InternalClients, LOGGER } from '@tessera/platform';
import { MetadataCommitService } from '../catalog/metadata-commit.service.js';
import { type RoundSplit, type Snapshot, type SnapshotCollection, bounds, wireKey } from './balancer-round.js';
import type { ShardRow } from './cluster-statistics.service.js';

/**
 * The main loop's splits: at zone bounds before a round's migrations, and of a chunk its donor
 * refused to move as too big (or, when it cannot be split, marking it jumbo). Each answers what it
 * did for the round's changelog row; a failure is logged and reported, not thrown.
 */
@Injectable()
export class BalancerSplitter {
  constructor(
    private readonly commits: MetadataCommitService,
    private readonly clients: InternalClients,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  /**
   * Jumbo handling (balancer-internals.md "Jumbo chunks"): a chunk its donor refused as too big
   * is split at the points the donor's splitVector finds; with none (one shard key value), it is
   * marked jumbo and the chunk selection policy leaves it alone until `clearJumboFlag`.
   */
  async splitOrMarkJumbo(plan: MigrationPlan, collection: SnapshotCollection, shards: readonly ShardRow[]): Promise<RoundSplit> {
    const base = { ns: plan.namespace, shard: plan.from, ...bounds(plan.range, collection.pattern), reason: 'chunkTooBig' as const };
    try {
      const donor = shards.find((s) => s.name === plan.from);
      if (donor === undefined) throw new TesseraError('SHARD_NOT_FOUND', `shard ${plan.from} is not registered`);
      const range = chunkRangeToWire(plan.range);
      const vector = await this.clients
        .migration(donor.url)
        .splitVector({ ns: plan.namespace, range, maxChunkSizeBytes: collection.distribution.maxChunkSizeBytes });
      // Under the max after all (the donor's estimate was above): nothing to do.
      if (!vector.unsplittable && vector.splitKeys.length === 0) return { ...base, outcome: 'left' };
      const points: ShardKey[] = vector.splitKeys.map((k, i) => shardKeyFromWire(k, `splitKeys[${i}]`));
      const decision = decideOnChunkTooBig(points);
      if (decision.action === 'markJumbo') {
        await this.commits.markJumbo({ ns: plan.namespace, generation: collection.generation, range });
        return { ...base, outcome: 'markedJumbo' };
      }
      await this.commits.commitSplit({
        ns: plan.namespace,
        expectedCollectionVersion: collection.generation,
        shard: plan.from,
        range,
        splitPoints: decision.splitPoints.map(shardKeyToWire),
        reason: 'chunkTooBig',
      });
      return { ...base, outcome: 'split', splitPoints: decision.splitPoints.map((p) => wireKey(collection.pattern, p)) };
    } catch (error) {
      this.logger.warn({ err: error, ns: plan.namespace }, `splitting a chunk too big to move failed: ${(error as Error).message}`);
      return { ...base, outcome: 'failed' };
    }
  }

  /** Splits every chunk that straddles a zone bound (MongoDB's chunk selection splits), awaited. */
  async splitAtZoneBoundaries(snapshot: Snapshot): Promise<RoundSplit[]> {
    const plans: Array<{ plan: SplitPlan; collection: SnapshotCollection }> = snapshot.collections.flatMap((collection) =>
      selectZoneBoundarySplits(collection.distribution).map((plan) => ({ plan, collection })),
    );
    return Promise.all(
      plans.map(async ({ plan, collection }): Promise<RoundSplit> => {
        const entry = {
          ns: plan.namespace,
          shard: plan.shard,
          ...bounds(plan.range, collection.pattern),
          reason: 'zoneBoundary' as const,
          splitPoints: plan.splitPoints.map((p) => wireKey(collection.pattern, p)),
        };
        try {
          await this.commits.commitSplit({
            ns: plan.namespace,
            expectedCollectionVersion: collection.generation,
            shard: plan.shard,
            range: chunkRangeToWire(plan.range),
            splitPoints: plan.splitPoints.map(shardKeyToWire),
            reason: 'zoneBoundary',
          });
          return { ...entry, outcome: 'split' };
        } catch (error) {
          this.logger.warn(
            { err: error, ns: plan.namespace },
            `zone boundary split of ${plan.namespace} failed: ${(error as Error).message}`,
          );
          return { ...entry, outcome: 'failed' };
        }
      }),
    );
  }
}
