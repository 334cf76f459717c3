import { Body, Controller, HttpCode, Post, UseGuards } from '@nestjs/common';
import { ClusterAuthGuard } from '@tessera/platform';
import type { MigrationDecision, MoveRangeResult } from '@tessera/protocol';
import { MigrationManagerService } from './migration-manager.service.js';
import { MigrationRecordsService } from './migration-records.service.js';

/** Migrations on the config server's internal API (the control plane exposes them to users). */
@Controller('internal/migrations')
@UseGuards(ClusterAuthGuard)
export class MigrationsController {
  constructor(
    private readonly migrations: MigrationManagerService,
    private readonly records: MigrationRecordsService,
  ) {}

  @Post('moveRange')
  @HttpCode(200)
  moveRange(@Body() body: unknown): Promise<MoveRangeResult> {
    return this.migrations.moveRange(body as never);
  }

  @Post('moveChunk')
  @HttpCode(200)
  moveChunk(@Body() body: unknown): Promise<MoveRangeResult> {
    return this.migrations.moveChunk(body as never);
  }

  @Post('ended')
  @HttpCode(200)
  ended(@Body() body: unknown): Promise<{ ok: 1 }> {
    return this.records.ended(body);
  }

  @Post('decide')
  @HttpCode(200)
  decide(@Body() body: unknown): Promise<{ decision: MigrationDecision }> {
    return this.records.decide(body);
  }
}
