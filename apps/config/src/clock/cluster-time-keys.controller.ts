import { Controller, Get, UseGuards } from '@nestjs/common';
import { ClusterAuthGuard } from '@tessera/platform';
import type { ClusterTimeKeys } from '@tessera/protocol';
import { ClusterTimeKeysService } from './cluster-time-keys.service.js';

/** The ClusterTime signing keys on the config server's internal API (routers and shards fetch them). */
@Controller('internal/clusterTimeKeys')
@UseGuards(ClusterAuthGuard)
export class ClusterTimeKeysController {
  constructor(private readonly keys: ClusterTimeKeysService) {}

  @Get()
  list(): Promise<ClusterTimeKeys> {
    return this.keys.keys();
  }
}
