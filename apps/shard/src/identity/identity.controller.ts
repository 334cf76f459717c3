import { Body, Controller, Get, Put, UseGuards } from '@nestjs/common';
import { ClusterAuthGuard } from '@tessera/platform';
import type { ShardIdentityResponse } from '@tessera/protocol';
import { ShardIdentityService } from './shard-identity.service.js';

@Controller('internal/identity')
@UseGuards(ClusterAuthGuard)
export class IdentityController {
  constructor(private readonly identity: ShardIdentityService) {}

  @Get()
  async get(): Promise<ShardIdentityResponse> {
    return { identity: await this.identity.get() };
  }

  @Put()
  async set(@Body() body: unknown): Promise<ShardIdentityResponse> {
    return { identity: await this.identity.set(body as never) };
  }
}
