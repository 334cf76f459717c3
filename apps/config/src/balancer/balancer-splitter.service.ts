import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import { type MigrationPlan, type ShardKey, type SplitPlan, TesseraError, decideOnSplitVector } from '@tessera/core';
import { chunkRangeToWire, shardKeyFromWire, shardKeyToWire } from '@tessera/protocol';
import { InternalClients, LOGGER } from '@tessera/platform';
import { MetadataCommitService } from '../catalog/metadata-commit.service.js';
import { type RoundSplit, type Snapshot, type SnapshotCollection, bounds, wireKey } from './balancer-round.js';
import type { ShardRow } from './balancer-catalog.store.js';

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
      const points: ShardKey[] = vector.splitKeys.map((k, i) => shardKeyFromWire(k, `splitKeys[${i}]`));
      const decision = decideOnSplitVector(points, vector.unsplittable);
      if (decision.action === 'leave') return { ...base, outcome: 'left' };
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

  /** Issues the round's splits at zone bounds (`planZoneBoundarySplits`) of the collections of `snapshot`, awaited. */
  async splitAtZoneBoundaries(splits: readonly SplitPlan[], snapshot: Snapshot): Promise<RoundSplit[]> {
    const byNs = new Map(snapshot.collections.map((c) => [c.distribution.namespace, c]));
    return Promise.all(
      splits.map(async (plan): Promise<RoundSplit> => {
        const collection = byNs.get(plan.namespace)!;
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
