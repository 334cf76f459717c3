import { Body, Controller, HttpCode, Post, UseGuards } from '@nestjs/common';
import { ClusterAuthGuard } from '@tessera/platform';
import type { RefreshSessionsResult } from '@tessera/protocol';
import { SessionsService } from './sessions.service.js';

/** The logical session cache's refresh on the config server's internal API (routers and shards call it). */
@Controller('internal/sessions')
@UseGuards(ClusterAuthGuard)
export class SessionsController {
  constructor(private readonly sessions: SessionsService) {}

  @Post('refresh')
  @HttpCode(200)
  refresh(@Body() body: unknown): Promise<RefreshSessionsResult> {
    return this.sessions.refresh(body);
  }

  @Post('live')
  @HttpCode(200)
  live(@Body() body: unknown): Promise<{ live: string[] }> {
    return this.sessions.liveSessions(body);
  }
}
