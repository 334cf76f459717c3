import { Body, Controller, Get, Header, HttpCode, Post, UseGuards } from '@nestjs/common';
import { ClusterAuthGuard, parseWith } from '@tessera/platform';
import {
  type MoveRangeResult,
  type RecvChunkStatus,
  type SessionHistoryBatch,
  type ShardMigrationStatus,
  migrationIdRequestSchema,
} from '@tessera/protocol';
import { MigrationCloner } from './migration-cloner.js';
import { MigrationDestinationService } from './migration-destination.service.js';
import { MigrationSourceService } from './migration-source.service.js';

/** The migration protocol's routes: the config server's moveRange, and what donor and recipient ask each other. */
@Controller('internal/migration')
@UseGuards(ClusterAuthGuard)
export class MigrationController {
  constructor(
    private readonly source: MigrationSourceService,
    private readonly cloner: MigrationCloner,
    private readonly destination: MigrationDestinationService,
  ) {}

  @Post('moveRange')
  @HttpCode(200)
  moveRange(@Body() body: unknown): Promise<MoveRangeResult> {
    return this.source.moveRange(body as never);
  }

  @Get('status')
  status(): Promise<ShardMigrationStatus> {
    return this.source.status();
  }

  @Post('migrateClone')
  @HttpCode(200)
  @Header('content-type', 'text/plain; charset=utf-8')
  migrateClone(@Body() body: unknown): Promise<string> {
    return this.cloner.migrateClone(body as never);
  }

  @Post('transferMods')
  @HttpCode(200)
  @Header('content-type', 'text/plain; charset=utf-8')
  transferMods(@Body() body: unknown): Promise<string> {
    return this.cloner.transferMods(body as never);
  }

  @Post('sessionHistory')
  @HttpCode(200)
  sessionHistory(@Body() body: unknown): Promise<SessionHistoryBatch> {
    return this.cloner.sessionHistory(body as never);
  }

  @Post('recvChunkStart')
  @HttpCode(200)
  recvChunkStart(@Body() body: unknown): Promise<RecvChunkStatus> {
    return this.destination.recvChunkStart(body as never);
  }

  @Post('recvChunkStatus')
  @HttpCode(200)
  recvChunkStatus(@Body() body: unknown): RecvChunkStatus {
    return this.destination.recvChunkStatus(parseWith(migrationIdRequestSchema, body, 'recvChunkStatus request').migrationId);
  }

  @Post('recvChunkCommit')
  @HttpCode(200)
  recvChunkCommit(@Body() body: unknown): Promise<RecvChunkStatus> {
    return this.destination.recvChunkCommit(parseWith(migrationIdRequestSchema, body, 'recvChunkCommit request').migrationId);
  }

  @Post('recvChunkPacing')
  @HttpCode(200)
  recvChunkPacing(@Body() body: unknown): { applied: boolean } {
    return this.destination.recvChunkPacing(body as never);
  }

  @Post('recvChunkRelease')
  @HttpCode(200)
  recvChunkRelease(@Body() body: unknown): Promise<{ released: boolean }> {
    return this.destination.recvChunkRelease(body as never);
  }
}
