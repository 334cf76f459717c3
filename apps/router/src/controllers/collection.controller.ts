import { Body, Controller, HttpCode, Param, Post, Req } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { parseWith } from '@tessera/platform';
import { namespaceOf } from '../api/namespace.js';
import {
  aggregateBodySchema,
  countBodySchema,
  deleteBodySchema,
  distinctBodySchema,
  findAndModifyBodySchema,
  updateBodySchema,
} from '../api/request-schemas.js';
import { callerOf } from '../auth/access-hooks.js';
import { CurrentOps } from '../operations/current-ops.service.js';
import { AggregateService } from '../reads/aggregate.service.js';
import { QueryService } from '../reads/query.service.js';
import { FindAndModifyService } from '../writes/find-and-modify.service.js';
import { WriteService } from '../writes/write.service.js';

/**
 * CRUD commands on one collection, MongoDB's command names under `/v1/{db}/{coll}`. Bodies and
 * answers are Extended JSON. Insert and find are served outside Nest (`collectionHotRoutes`); the
 * index routes (`/v1/{db}/{coll}/indexes`) are IndexesController's.
 */
@Controller('v1/:db/:coll')
export class CollectionController {
  constructor(
    private readonly writes: WriteService,
    private readonly findAndModifies: FindAndModifyService,
    private readonly queries: QueryService,
    private readonly aggregates: AggregateService,
    private readonly ops: CurrentOps,
  ) {}

  @Post('update')
  @HttpCode(200)
  update(@Param('db') db: string, @Param('coll') coll: string, @Body() body: unknown) {
    const ns = namespaceOf(db, coll);
    const request = parseWith(updateBodySchema, body, 'update request');
    return this.ops.run({ op: 'update', command: 'update', ns, body: request }, () => this.writes.update(ns, request));
  }

  @Post('delete')
  @HttpCode(200)
  delete(@Param('db') db: string, @Param('coll') coll: string, @Body() body: unknown) {
    const ns = namespaceOf(db, coll);
    const request = parseWith(deleteBodySchema, body, 'delete request');
    return this.ops.run({ op: 'remove', command: 'delete', ns, body: request }, () => this.writes.delete(ns, request));
  }

  @Post('findAndModify')
  @HttpCode(200)
  findAndModify(@Param('db') db: string, @Param('coll') coll: string, @Body() body: unknown) {
    const ns = namespaceOf(db, coll);
    const request = parseWith(findAndModifyBodySchema, body, 'findAndModify request');
    return this.ops.run({ op: 'command', command: 'findAndModify', ns, body: request }, () =>
      this.findAndModifies.findAndModify(ns, request),
    );
  }

  @Post('count')
  @HttpCode(200)
  count(@Param('db') db: string, @Param('coll') coll: string, @Body() body: unknown) {
    const ns = namespaceOf(db, coll);
    const request = parseWith(countBodySchema, body ?? {}, 'count request');
    return this.ops.run({ op: 'command', command: 'count', ns, body: request }, () => this.queries.count(ns, request));
  }

  @Post('aggregate')
  @HttpCode(200)
  aggregate(@Param('db') db: string, @Param('coll') coll: string, @Body() body: unknown, @Req() http: FastifyRequest) {
    const ns = namespaceOf(db, coll);
    const request = parseWith(aggregateBodySchema, body, 'aggregate request');
    return this.ops.run({ op: 'command', command: 'aggregate', ns, body: request }, () =>
      this.aggregates.aggregate(ns, request, callerOf(http)),
    );
  }

  @Post('distinct')
  @HttpCode(200)
  distinct(@Param('db') db: string, @Param('coll') coll: string, @Body() body: unknown) {
    const ns = namespaceOf(db, coll);
    const request = parseWith(distinctBodySchema, body, 'distinct request');
    return this.ops.run({ op: 'command', command: 'distinct', ns, body: request }, () => this.queries.distinct(ns, request));
  }
}
