import { Body, Controller, Delete, Get, HttpCode, Param, Post } from '@nestjs/common';
import { parseWith } from '@tessera/platform';
import { namespaceOf } from '../api/namespace.js';
import { createIndexesBodySchema } from '../api/request-schemas.js';
import { IndexesService } from '../indexes/indexes.service.js';

/** MongoDB's createIndexes, listIndexes and dropIndexes on one collection. */
@Controller('v1/:db/:coll/indexes')
export class IndexesController {
  constructor(private readonly indexes: IndexesService) {}

  @Post()
  @HttpCode(200)
  create(@Param('db') db: string, @Param('coll') coll: string, @Body() body: unknown) {
    return this.indexes.createIndexes(namespaceOf(db, coll), parseWith(createIndexesBodySchema, body, 'createIndexes request'));
  }

  @Get()
  list(@Param('db') db: string, @Param('coll') coll: string) {
    return this.indexes.listIndexes(namespaceOf(db, coll));
  }

  @Delete(':name')
  drop(@Param('db') db: string, @Param('coll') coll: string, @Param('name') name: string) {
    return this.indexes.dropIndexes(namespaceOf(db, coll), name);
  }
}
