import { Body, Controller, Get, HttpCode, Post, UseGuards } from '@nestjs/common';
import { ClusterAuthGuard, parseWith } from '@tessera/platform';
import { type AuthenticateResult, authenticateRequestSchema, recordAuditRequestSchema } from '@tessera/protocol';
import { AccessControlService } from './access-control.service.js';

/**
 * Sign-ins on the config server's internal API: routers verify their callers here and cache the
 * answer, and send what they audit.
 */
@Controller('internal/auth')
@UseGuards(ClusterAuthGuard)
export class AccessController {
  constructor(private readonly access: AccessControlService) {}

  @Post('authenticate')
  @HttpCode(200)
  authenticate(@Body() body: unknown): Promise<AuthenticateResult> {
    const request = parseWith(authenticateRequestSchema, body, 'authenticate request');
    return this.access.authenticate(request.authorization, request.remoteAddress, request.node);
  }

  @Post('audit')
  @HttpCode(204)
  async audit(@Body() body: unknown): Promise<void> {
    await this.access.recordAudit(parseWith(recordAuditRequestSchema, body, 'audit request').entries);
  }

  @Get('generation')
  async generation(): Promise<{ generation: number }> {
    return { generation: await this.access.generation() };
  }
}
