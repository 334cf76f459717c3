import { Body, Controller, Get, HttpCode, Post, UseGuards } from '@nestjs/common';
import { ClusterAuthGuard } from '@tessera/platform';
import type { ClusterInfo, RouterDescription } from '@tessera/protocol';
import { RouterRegistryService } from './router-registry.service.js';

@Controller('internal/routers')
@UseGuards(ClusterAuthGuard)
export class RoutersController {
  constructor(private readonly registry: RouterRegistryService) {}

  @Post('ping')
  @HttpCode(200)
  ping(@Body() body: unknown): Promise<ClusterInfo> {
    return this.registry.ping(body as never);
  }

  @Get()
  async list(): Promise<{ routers: RouterDescription[] }> {
    return { routers: await this.registry.listRouters() };
  }
}
