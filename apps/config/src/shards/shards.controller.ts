import { Body, Controller, Get, Post, UseGuards } from '@nestjs/common';
import { ClusterAuthGuard } from '@tessera/platform';
import type { ShardDescription } from '@tessera/protocol';
import { ShardRegistryService } from './shard-registry.service.js';

@Controller('internal/shards')
@UseGuards(ClusterAuthGuard)
export class ShardsController {
  constructor(private readonly registry: ShardRegistryService) {}

  @Post()
  addShard(@Body() body: unknown): Promise<ShardDescription> {
    return this.registry.addShard(body as never);
  }

  @Get()
  async listShards(): Promise<{ shards: ShardDescription[] }> {
    return { shards: await this.registry.listShards() };
  }
}
