import { Body, Controller, HttpCode, Param, Post } from '@nestjs/common';
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
  ) {}

  @Post('update')
  @HttpCode(200)
  update(@Param('db') db: string, @Param('coll') coll: string, @Body() body: unknown) {
    return this.writes.update(namespaceOf(db, coll), parseWith(updateBodySchema, body, 'update request'));
  }

  @Post('delete')
  @HttpCode(200)
  delete(@Param('db') db: string, @Param('coll') coll: string, @Body() body: unknown) {
    return this.writes.delete(namespaceOf(db, coll), parseWith(deleteBodySchema, body, 'delete request'));
  }

  @Post('findAndModify')
  @HttpCode(200)
  findAndModify(@Param('db') db: string, @Param('coll') coll: string, @Body() body: unknown) {
    return this.findAndModifies.findAndModify(namespaceOf(db, coll), parseWith(findAndModifyBodySchema, body, 'findAndModify request'));
  }

  @Post('count')
  @HttpCode(200)
  count(@Param('db') db: string, @Param('coll') coll: string, @Body() body: unknown) {
    return this.queries.count(namespaceOf(db, coll), parseWith(countBodySchema, body ?? {}, 'count request'));
  }

  @Post('aggregate')
  @HttpCode(200)
  aggregate(@Param('db') db: string, @Param('coll') coll: string, @Body() body: unknown) {
    return this.aggregates.aggregate(namespaceOf(db, coll), parseWith(aggregateBodySchema, body, 'aggregate request'));
  }

  @Post('distinct')
  @HttpCode(200)
  distinct(@Param('db') db: string, @Param('coll') coll: string, @Body() body: unknown) {
    return this.queries.distinct(namespaceOf(db, coll), parseWith(distinctBodySchema, body, 'distinct request'));
  }
}
