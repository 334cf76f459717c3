import { Body, Controller, Delete, Get, HttpCode, Param, ParseUUIDPipe, Post, Put, UseGuards } from '@nestjs/common';
import { ClusterAuthGuard, parseWith } from '@tessera/platform';
import { type ShardStats, keyPatternSchema } from '@tessera/protocol';
import { z } from 'zod';
import { CollectionStorageService } from './collection-storage.service.js';

const refineSchema = z.strictObject({ keyPattern: keyPatternSchema });

@Controller('internal')
@UseGuards(ClusterAuthGuard)
export class CollectionsController {
  constructor(private readonly storage: CollectionStorageService) {}

  @Put('collections/:uuid')
  @HttpCode(200)
  async create(@Param('uuid', ParseUUIDPipe) uuid: string, @Body() body: unknown): Promise<{ ok: 1 }> {
    await this.storage.createCollection(uuid, body as never);
    return { ok: 1 };
  }

  @Delete('collections/:uuid')
  async drop(@Param('uuid', ParseUUIDPipe) uuid: string): Promise<{ ok: 1 }> {
    await this.storage.dropCollection(uuid);
    return { ok: 1 };
  }

  @Post('collections/:uuid/refine')
  @HttpCode(200)
  async refine(@Param('uuid', ParseUUIDPipe) uuid: string, @Body() body: unknown): Promise<{ rekeyed: number }> {
    const { keyPattern } = parseWith(refineSchema, body, 'refine request');
    return { rekeyed: await this.storage.refineShardKey(uuid, keyPattern) };
  }

  @Delete('databases/:db')
  async dropDatabase(@Param('db') db: string): Promise<{ dropped: number }> {
    return { dropped: await this.storage.dropDatabase(db) };
  }

  @Get('stats')
  stats(): Promise<ShardStats> {
    return this.storage.stats();
  }
}
