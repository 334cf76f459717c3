import { Body, Controller, HttpCode, Post, Req } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { parseWith } from '@tessera/platform';
import { clusterSessionId } from '@tessera/protocol';
import { sessionIdsOf, sessionListBodySchema } from '../api/session-fields.js';
import { principalOfRequest } from '../auth/access-hooks.js';
import { RouterSessions } from '../sessions/router-sessions.service.js';

/** MongoDB's session commands under `/v1/admin`. A client may also make up its own session id, as drivers do. */
@Controller('v1/admin')
export class SessionsController {
  constructor(private readonly sessions: RouterSessions) {}

  @Post('startSession')
  @HttpCode(200)
  startSession(@Req() request: FastifyRequest) {
    const principal = principalOfRequest(request);
    return { ...this.sessions.start(principal === undefined ? undefined : (id) => clusterSessionId(id, principal.user)), ok: 1 as const };
  }

  @Post('refreshSessions')
  @HttpCode(200)
  refreshSessions(@Body() body: unknown) {
    this.sessions.refresh(sessionIdsOf(parseWith(sessionListBodySchema, body, 'refreshSessions request')));
    return { ok: 1 as const };
  }

  @Post('endSessions')
  @HttpCode(200)
  endSessions(@Body() body: unknown) {
    this.sessions.end(sessionIdsOf(parseWith(sessionListBodySchema, body, 'endSessions request')));
    return { ok: 1 as const };
  }

  @Post('killSessions')
  @HttpCode(200)
  async killSessions(@Body() body: unknown) {
    await this.sessions.kill(sessionIdsOf(parseWith(sessionListBodySchema, body, 'killSessions request')));
    return { ok: 1 as const };
  }
}
