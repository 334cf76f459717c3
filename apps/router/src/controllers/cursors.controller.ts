import { Body, Controller, Delete, HttpCode, Param, Post, Req } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { parseWith } from '@tessera/platform';
import { nextBodySchema } from '../api/request-schemas.js';
import { callerOf } from '../auth/access-hooks.js';
import { QueryService } from '../reads/query.service.js';

const cursorIdSchema = z.string().regex(/^[1-9]\d{0,19}$/, 'must be a cursor id (decimal digits)');

/** MongoDB's getMore and killCursors on the router's cursors, each only by the user who opened it. */
@Controller('v1/cursors')
export class CursorsController {
  constructor(private readonly queries: QueryService) {}

  @Post(':id/next')
  @HttpCode(200)
  next(@Param('id') id: string, @Body() body: unknown, @Req() http: FastifyRequest) {
    const request = parseWith(nextBodySchema, body ?? {}, 'next request');
    return this.queries.next(parseWith(cursorIdSchema, id, 'cursor id'), request.batchSize, request, callerOf(http));
  }

  @Delete(':id')
  kill(@Param('id') id: string, @Req() http: FastifyRequest) {
    return this.queries.kill(parseWith(cursorIdSchema, id, 'cursor id'), callerOf(http));
  }
}
