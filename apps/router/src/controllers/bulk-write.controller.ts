import { Body, Controller, HttpCode, Post } from '@nestjs/common';
import { parseWith } from '@tessera/platform';
import { bulkWriteBodySchema } from '../api/request-schemas.js';
import { BulkWriteService, type BulkWriteReply } from '../writes/bulk-write.service.js';

/** MongoDB 8.0's bulkWrite under `/v1/admin`: writes to several namespaces in one request. */
@Controller('v1/admin')
export class BulkWriteController {
  constructor(private readonly bulk: BulkWriteService) {}

  @Post('bulkWrite')
  @HttpCode(200)
  bulkWrite(@Body() body: unknown): Promise<BulkWriteReply> {
    return this.bulk.bulkWrite(parseWith(bulkWriteBodySchema, body, 'bulkWrite request'));
  }
}
