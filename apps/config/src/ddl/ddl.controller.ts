import { Body, Controller, Get, HttpCode, Post, UseGuards } from '@nestjs/common';
import { ClusterAuthGuard } from '@tessera/platform';
import type { DatabaseDescription, DropResult, RemoveShardResult, ShardCollectionResult } from '@tessera/protocol';
import { type LeaderInfo, LeaderService } from '../leader/leader.service.js';
import { ShardRegistryService } from '../shards/shard-registry.service.js';
import { ZonesService } from '../zones/zones.service.js';
import { CollectionDdlService } from './collection-ddl.service.js';
import { DatabaseDdlService } from './database-ddl.service.js';

/** The DDL commands, MongoDB's names, one POST each; bodies are validated by the services. */
@Controller('internal/ddl')
@UseGuards(ClusterAuthGuard)
export class DdlController {
  constructor(
    private readonly databases: DatabaseDdlService,
    private readonly collections: CollectionDdlService,
    private readonly zones: ZonesService,
    private readonly shards: ShardRegistryService,
  ) {}

  @Post('enableSharding')
  @HttpCode(200)
  enableSharding(@Body() body: unknown): Promise<DatabaseDescription> {
    return this.databases.enableSharding(body as never);
  }

  @Post('shardCollection')
  @HttpCode(200)
  shardCollection(@Body() body: unknown): Promise<ShardCollectionResult> {
    return this.collections.shardCollection(body as never);
  }

  @Post('refineCollectionShardKey')
  @HttpCode(200)
  refineCollectionShardKey(@Body() body: unknown): Promise<ShardCollectionResult> {
    return this.collections.refineCollectionShardKey(body as never);
  }

  @Post('dropCollection')
  @HttpCode(200)
  dropCollection(@Body() body: unknown): Promise<DropResult> {
    return this.collections.dropCollection(body);
  }

  @Post('renameCollection')
  @HttpCode(200)
  renameCollection(@Body() body: unknown): Promise<{ ok: 1 }> {
    return this.collections.renameCollection(body as never);
  }

  @Post('dropDatabase')
  @HttpCode(200)
  dropDatabase(@Body() body: unknown): Promise<DropResult> {
    return this.databases.dropDatabase(body);
  }

  @Post('movePrimary')
  @HttpCode(200)
  movePrimary(@Body() body: unknown): Promise<DatabaseDescription> {
    return this.databases.movePrimary(body as never);
  }

  @Post('removeShard')
  @HttpCode(200)
  removeShard(@Body() body: unknown): Promise<RemoveShardResult> {
    return this.shards.removeShard(body as never);
  }

  @Post('addShardToZone')
  @HttpCode(200)
  addShardToZone(@Body() body: unknown): Promise<{ zones: string[] }> {
    return this.zones.addShardToZone(body as never);
  }

  @Post('removeShardFromZone')
  @HttpCode(200)
  removeShardFromZone(@Body() body: unknown): Promise<{ zones: string[] }> {
    return this.zones.removeShardFromZone(body as never);
  }

  @Post('updateZoneKeyRange')
  @HttpCode(200)
  updateZoneKeyRange(@Body() body: unknown): Promise<{ ok: 1 }> {
    return this.zones.updateZoneKeyRange(body as never);
  }
}

@Controller('internal/leader')
@UseGuards(ClusterAuthGuard)
export class LeaderController {
  constructor(private readonly leader: LeaderService) {}

  /** Who leads, and whether this process does. */
  @Get()
  async get(): Promise<{ leader: LeaderInfo | null; self: { id: string; isLeader: boolean } }> {
    return { leader: (await this.leader.leader()) ?? null, self: { id: this.leader.id, isLeader: this.leader.isLeader } };
  }
}
