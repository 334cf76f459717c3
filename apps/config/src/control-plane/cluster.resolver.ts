import { UseGuards } from '@nestjs/common';
import { Args, Context, Int, Query, ResolveField, Resolver, Root } from '@nestjs/graphql';
import { ConfigClockService } from '../clock/config-clock.service.js';
import { EventBusService } from '../events/event-bus.service.js';
import { LeaderService } from '../leader/leader.service.js';
import { RouterRegistryService } from '../routers/router-registry.service.js';
import { ShardRegistryService } from '../shards/shard-registry.service.js';
import { type ControlPlaneContext, loadersOf } from './control-plane-context.js';
import { ControlPlaneGuard } from './control-plane.guard.js';
import { ControlPlaneReadsService } from './control-plane-reads.service.js';
import {
  ClusterOverviewType,
  CollectionType,
  DatabaseType,
  DdlOperationType,
  MigrationsType,
  SettingType,
  ShardStatisticsType,
  ShardType,
} from './graphql-types.js';

/** The cluster overview: shards, databases, routers, zones, the leader and the clock. */
@Resolver(() => ClusterOverviewType)
@UseGuards(ControlPlaneGuard)
export class ClusterResolver {
  constructor(
    private readonly shards: ShardRegistryService,
    private readonly routers: RouterRegistryService,
    private readonly leader: LeaderService,
    private readonly clock: ConfigClockService,
    private readonly reads: ControlPlaneReadsService,
    private readonly events: EventBusService,
  ) {}

  @Query(() => ClusterOverviewType, { description: 'Shards with state, zones and statistics; databases; routers; the leader; the clock.' })
  async cluster(): Promise<ClusterOverviewType> {
    const [shards, databases, routers, zoneRanges, leader] = await Promise.all([
      this.shards.listShards(),
      this.reads.databases(),
      this.routers.listRouters(),
      this.reads.zoneRanges(),
      this.leader.leader(),
    ]);
    return {
      shards,
      databases,
      routers,
      zoneRanges,
      leader: leader ?? null,
      vectorClock: this.clock.now(),
      lastEventSeq: this.events.lastSeq,
    };
  }

  @Query(() => MigrationsType, {
    description: 'Migrations in flight with their phase and progress, and recent ones with per-phase durations.',
  })
  migrations(
    @Args('ns', { type: () => String, nullable: true }) ns?: string,
    @Args('recent', { type: () => Int, defaultValue: 20 }) recent = 20,
  ): Promise<MigrationsType> {
    return this.reads.migrations(ns ?? undefined, recent);
  }

  @Query(() => [DdlOperationType], {
    description: 'DDL operations: the running ones with their phase (oldest first), then the last ended ones (newest first).',
  })
  ddlOperations(@Args('recent', { type: () => Int, defaultValue: 20 }) recent = 20): Promise<DdlOperationType[]> {
    return this.reads.ddlOperations(recent);
  }

  @Query(() => [SettingType], { description: 'The cluster settings documents (config.settings).' })
  settings(): Promise<SettingType[]> {
    return this.reads.settings();
  }
}

@Resolver(() => ShardType)
export class ShardResolver {
  constructor(private readonly reads: ControlPlaneReadsService) {}

  @ResolveField(() => ShardStatisticsType, { description: 'Chunks and estimated data on this shard (batched across shards).' })
  statistics(@Root() shard: ShardType, @Context() context: ControlPlaneContext): Promise<ShardStatisticsType> {
    return loadersOf(context, this.reads).shardStatistics.load(shard.name);
  }
}

@Resolver(() => DatabaseType)
export class DatabaseResolver {
  constructor(private readonly reads: ControlPlaneReadsService) {}

  @ResolveField(() => [CollectionType], {
    description: 'Its collections, sharded (batched across databases) and unsharded (asked of its primary shard), in name order.',
  })
  collections(@Root() database: DatabaseType, @Context() context: ControlPlaneContext): Promise<CollectionType[]> {
    return loadersOf(context, this.reads).collectionsOfDatabase.load(database.name);
  }
}
