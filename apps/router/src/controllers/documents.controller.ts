import { Body, Controller, Delete, Get, Param, Patch, Post, Put } from '@nestjs/common';
import { parseWith } from '@tessera/platform';
import { namespaceOf } from '../api/namespace.js';
import { documentSchema } from '../api/request-schemas.js';
import { DocumentsService } from '../documents/documents.service.js';

/**
 * Single-document REST convenience routes. `{id}` is the `_id`: 24 hex digits are an
 * ObjectId, an integer literal a number, anything else a string.
 */
@Controller('v1/:db/:coll/documents')
export class DocumentsController {
  constructor(private readonly documents: DocumentsService) {}

  @Post()
  create(@Param('db') db: string, @Param('coll') coll: string, @Body() body: unknown) {
    return this.documents.create(namespaceOf(db, coll), parseWith(documentSchema, body, 'document'));
  }

  @Get(':id')
  get(@Param('db') db: string, @Param('coll') coll: string, @Param('id') id: string) {
    return this.documents.get(namespaceOf(db, coll), id);
  }

  @Put(':id')
  replace(@Param('db') db: string, @Param('coll') coll: string, @Param('id') id: string, @Body() body: unknown) {
    return this.documents.replace(namespaceOf(db, coll), id, parseWith(documentSchema, body, 'replacement document'));
  }

  @Patch(':id')
  patch(@Param('db') db: string, @Param('coll') coll: string, @Param('id') id: string, @Body() body: unknown) {
    return this.documents.patch(namespaceOf(db, coll), id, parseWith(documentSchema, body, 'update document'));
  }

  @Delete(':id')
  remove(@Param('db') db: string, @Param('coll') coll: string, @Param('id') id: string) {
    return this.documents.remove(namespaceOf(db, coll), id);
  }
}
