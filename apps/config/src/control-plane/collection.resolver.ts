import { UseGuards } from '@nestjs/common';
import { Args, Int, Query, ResolveField, Resolver, Root } from '@nestjs/graphql';
import { JsonScalar } from './json.scalar.js';
import { ControlPlaneGuard } from './control-plane.guard.js';
import { ControlPlaneReadsService } from './control-plane-reads.service.js';
import {
  ChunkConnectionType,
  ChunkType,
  ClusterTimestampInput,
  CollectionType,
  ShardDistributionType,
  ZoneRangeType,
} from './graphql-types.js';

/** A sharded collection: key pattern, chunks, distribution and zones; and key lookups. */
@Resolver(() => CollectionType)
@UseGuards(ControlPlaneGuard)
export class CollectionResolver {
  constructor(private readonly reads: ControlPlaneReadsService) {}

  @Query(() => CollectionType, { description: 'A sharded collection; NAMESPACE_NOT_FOUND when it is not sharded.' })
  collection(@Args('ns') ns: string): Promise<CollectionType> {
    return this.reads.collection(ns);
  }

  @Query(() => ChunkType, {
    description: 'The chunk holding a shard key (an object naming every key field); with atClusterTime, the shard that owned it then.',
  })
  chunkForKey(
    @Args('ns') ns: string,
    @Args('key', { type: () => JsonScalar }) key: unknown,
    @Args('atClusterTime', { type: () => ClusterTimestampInput, nullable: true }) atClusterTime?: ClusterTimestampInput,
  ): Promise<ChunkType> {
    return this.reads.chunkForKey(ns, key, atClusterTime && { t: atClusterTime.t, i: atClusterTime.i });
  }

  @ResolveField(() => ChunkConnectionType, { description: 'Chunks in key order, a page at a time, optionally on one shard.' })
  chunks(
    @Root() collection: CollectionType,
    @Args('first', { type: () => Int, defaultValue: 100 }) first: number,
    @Args('after', { type: () => String, nullable: true }) after?: string,
    @Args('shard', { type: () => String, nullable: true }) shard?: string,
  ): Promise<ChunkConnectionType> {
    return this.reads.chunks(collection.ns, { first, ...(after ? { after } : {}), ...(shard ? { shard } : {}) });
  }

  @ResolveField(() => [ShardDistributionType], { description: 'Chunks and estimated bytes per shard.' })
  distribution(@Root() collection: CollectionType): Promise<ShardDistributionType[]> {
    return this.reads.distribution(collection.ns);
  }

  @ResolveField(() => [ZoneRangeType])
  zones(@Root() collection: CollectionType): Promise<ZoneRangeType[]> {
    return this.reads.zoneRanges(collection.ns);
  }
}
