import { UseGuards, UseInterceptors } from '@nestjs/common';
import { Args, Mutation, Resolver } from '@nestjs/graphql';
import type { Chunk } from '@tessera/core';
import type { DatabaseDescription, MoveRangeResult } from '@tessera/protocol';
import { ControlPlaneCommandsService } from './control-plane-commands.service.js';
import { AuditInterceptor } from './audit.interceptor.js';
import { ControlPlaneGuard } from './control-plane.guard.js';
import { ControlPlaneReadsService, chunkTypeOf } from './control-plane-reads.service.js';
import {
  ChunkType,
  CollectionType,
  DatabaseType,
  DropResultType,
  RemoveShardResultType,
  ShardCollectionInput,
  MigrationOperationType,
  type MigrationResultType,
  ShardType,
} from './graphql-types.js';
import { JsonScalar } from './json.scalar.js';

/**
 * One mutation per administrative command built so far (admin token). They run the same
 * services as the internal API, on the leader where the command needs it. The balancer's
 * mutations are in balancer.resolver.ts.
 */
@Resolver()
@UseGuards(ControlPlaneGuard)
@UseInterceptors(AuditInterceptor)
export class AdminResolver {
  constructor(
    private readonly commands: ControlPlaneCommandsService,
    private readonly reads: ControlPlaneReadsService,
  ) {}

  private async operation(
    ns: string,
    request: Record<string, unknown>,
    run: () => Promise<MoveRangeResult>,
    wait: boolean,
  ): Promise<MigrationOperationType> {
    const op = await this.commands.migrate(ns, request, run, wait);
    return { ...op, result: op.result && migrationResultOf(op.result) };
  }

  @Mutation(() => ShardType, { description: 'Adds a shard; idempotent for the same name and URL.' })
  addShard(@Args('name') name: string, @Args('url') url: string): Promise<ShardType> {
    return this.commands.addShard(name, url);
  }

  @Mutation(() => RemoveShardResultType, { description: 'Starts draining a shard; call again for progress; it leaves when empty.' })
  async removeShard(@Args('name') name: string): Promise<RemoveShardResultType> {
    const r = await this.commands.removeShard(name);
    return {
      state: r.state,
      shard: r.shard,
      remainingChunks: r.remaining.chunks,
      remainingJumboChunks: r.remaining.jumboChunks,
      remainingDatabases: r.remaining.databases,
      remainingMigrations: r.remaining.migrations,
      dbsToMove: r.dbsToMove,
      migrationIds: r.migrationIds,
      note: r.note,
    };
  }

  @Mutation(() => DatabaseType, { description: 'Creates a database (if missing) on primaryShard or the least loaded shard.' })
  async enableSharding(
    @Args('db') db: string,
    @Args('primaryShard', { type: () => String, nullable: true }) primaryShard?: string,
  ): Promise<DatabaseType> {
    return databaseOf(await this.commands.enableSharding(db, primaryShard ?? undefined));
  }

  @Mutation(() => CollectionType)
  async shardCollection(@Args('input') input: ShardCollectionInput): Promise<CollectionType> {
    await this.commands.shardCollection({
      ns: input.ns,
      key: input.key as Record<string, 1 | 'hashed'>,
      ...(input.unique != null ? { unique: input.unique } : {}),
      ...(input.numInitialChunks != null ? { numInitialChunks: input.numInitialChunks } : {}),
    });
    return this.reads.collection(input.ns);
  }

  @Mutation(() => CollectionType)
  async refineCollectionShardKey(@Args('ns') ns: string, @Args('key', { type: () => JsonScalar }) key: unknown): Promise<CollectionType> {
    await this.commands.refineCollectionShardKey(ns, key as Record<string, 1 | 'hashed'>);
    return this.reads.collection(ns);
  }

  @Mutation(() => DropResultType)
  async dropCollection(@Args('ns') ns: string): Promise<DropResultType> {
    return { ns, dropped: (await this.commands.dropCollection(ns)).dropped };
  }

  @Mutation(() => DropResultType)
  async dropDatabase(@Args('db') db: string): Promise<DropResultType> {
    return { ns: db, dropped: (await this.commands.dropDatabase(db)).dropped };
  }

  @Mutation(() => DatabaseType)
  async movePrimary(@Args('db') db: string, @Args('to') to: string): Promise<DatabaseType> {
    return databaseOf(await this.commands.movePrimary(db, to));
  }

  @Mutation(() => [ChunkType], {
    description: 'Splits the chunk holding `at` at `at` (an object naming every shard key field); returns the two pieces.',
  })
  async splitChunk(@Args('ns') ns: string, @Args('at', { type: () => JsonScalar }) at: unknown): Promise<ChunkType[]> {
    return (await this.commands.splitChunk(ns, at)).map((c: Chunk) => chunkTypeOf(c));
  }

  @Mutation(() => ChunkType, { description: 'Merges the contiguous chunks of one shard that exactly cover [min, max).' })
  async mergeChunks(
    @Args('ns') ns: string,
    @Args('min', { type: () => JsonScalar }) min: unknown,
    @Args('max', { type: () => JsonScalar }) max: unknown,
  ): Promise<ChunkType> {
    return chunkTypeOf(await this.commands.mergeChunks(ns, min, max));
  }

  @Mutation(() => ChunkType, { description: 'Clears the jumbo flag of the chunk holding `key`.' })
  async clearJumboFlag(@Args('ns') ns: string, @Args('key', { type: () => JsonScalar }) key: unknown): Promise<ChunkType> {
    return chunkTypeOf(await this.commands.clearJumboFlag(ns, key));
  }

  @Mutation(() => MigrationOperationType, {
    description:
      'Moves [min, max) (or, without max, the chunk starting at min) to toShard, splitting first for a sub-range. Answers at once with an operation id unless wait is true.',
  })
  moveRange(
    @Args('ns') ns: string,
    @Args('min', { type: () => JsonScalar }) min: unknown,
    @Args('toShard') toShard: string,
    @Args('max', { type: () => JsonScalar, nullable: true }) max?: unknown,
    @Args('forceJumbo', { defaultValue: false }) forceJumbo: boolean = false,
    @Args('waitForDelete', { defaultValue: false }) waitForDelete: boolean = false,
    @Args('wait', { defaultValue: false, description: 'answer when the migration has ended' }) wait: boolean = false,
  ): Promise<MigrationOperationType> {
    const request = {
      ns,
      min: min as Record<string, unknown>,
      ...(max == null ? {} : { max: max as Record<string, unknown> }),
      toShard,
      forceJumbo,
      waitForDelete,
    };
    return this.operation(ns, request, () => this.commands.moveRange(request), wait);
  }

  @Mutation(() => MigrationOperationType, {
    description: 'Moves the chunk holding the shard key `find`, or the chunk with exactly these `bounds` [min, max], to shard `to`.',
  })
  moveChunk(
    @Args('ns') ns: string,
    @Args('to') to: string,
    @Args('find', { type: () => JsonScalar, nullable: true }) find?: unknown,
    @Args('bounds', { type: () => [JsonScalar], nullable: true }) bounds?: unknown[],
    @Args('forceJumbo', { defaultValue: false }) forceJumbo: boolean = false,
    @Args('waitForDelete', { defaultValue: false }) waitForDelete: boolean = false,
    @Args('wait', { defaultValue: false, description: 'answer when the migration has ended' }) wait: boolean = false,
  ): Promise<MigrationOperationType> {
    const request = {
      ns,
      to,
      ...(find == null ? {} : { find: find as Record<string, unknown> }),
      ...(bounds == null ? {} : { bounds: bounds as [Record<string, unknown>, Record<string, unknown>] }),
      forceJumbo,
      waitForDelete,
    };
    return this.operation(ns, request, () => this.commands.moveChunk(request), wait);
  }

  @Mutation(() => [String], { description: "Assigns a zone to a shard; returns the shard's zones." })
  async addShardToZone(@Args('shard') shard: string, @Args('zone') zone: string): Promise<string[]> {
    return (await this.commands.addShardToZone(shard, zone)).zones;
  }

  @Mutation(() => [String], { description: "Removes a zone from a shard; returns the shard's zones." })
  async removeShardFromZone(@Args('shard') shard: string, @Args('zone') zone: string): Promise<string[]> {
    return (await this.commands.removeShardFromZone(shard, zone)).zones;
  }

  @Mutation(() => Boolean, { description: 'Assigns [min, max) of ns to zone, or removes the range when zone is null.' })
  async updateZoneKeyRange(
    @Args('ns') ns: string,
    @Args('min', { type: () => JsonScalar }) min: unknown,
    @Args('max', { type: () => JsonScalar }) max: unknown,
    @Args('zone', { type: () => String, nullable: true }) zone: string | null,
  ): Promise<boolean> {
    await this.commands.updateZoneKeyRange({ ns, min: min as Record<string, unknown>, max: max as Record<string, unknown>, zone });
    return true;
  }
}

function migrationResultOf(r: MoveRangeResult): MigrationResultType {
  return {
    migrationId: r.migrationId,
    ns: r.ns,
    donor: r.donor,
    recipient: r.recipient,
    min: r.range.min,
    max: r.range.max,
    documentsCloned: r.documentsCloned,
    bytesCloned: r.bytesCloned,
    criticalSectionMs: r.criticalSectionMs,
    phases: r.phases,
  };
}

function databaseOf(d: DatabaseDescription): DatabaseType {
  return { name: d.name, primaryShard: d.primaryShard, versionUuid: d.version.uuid, versionLastMod: d.version.lastMod };
}
