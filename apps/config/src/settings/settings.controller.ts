import { Body, Controller, Get, HttpCode, Post, UseGuards } from '@nestjs/common';
import { ClusterAuthGuard } from '@tessera/platform';
import type { ClusterSettings } from '@tessera/protocol';
import { ClusterSettingsService } from './cluster-settings.service.js';

/** Cluster settings and per-collection balancing options on the internal API. */
@Controller('internal/settings')
@UseGuards(ClusterAuthGuard)
export class SettingsController {
  constructor(private readonly settings: ClusterSettingsService) {}

  @Get()
  get(): Promise<ClusterSettings> {
    return this.settings.get();
  }

  @Post()
  @HttpCode(200)
  update(@Body() body: unknown): Promise<ClusterSettings> {
    return this.settings.update(body as never);
  }

  @Post('configureCollectionBalancing')
  @HttpCode(200)
  configureCollectionBalancing(@Body() body: unknown): Promise<{ ok: 1 }> {
    return this.settings.configureCollectionBalancing(body as never);
  }
}
