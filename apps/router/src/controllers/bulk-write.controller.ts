import { Body, Controller, Get, HttpCode, Post } from '@nestjs/common';
import { parseWith } from '@tessera/platform';
import { bulkWriteBodySchema } from '../api/request-schemas.js';
import { type CurrentOpEntry, CurrentOps } from '../operations/current-ops.service.js';
import { BulkWriteService, type BulkWriteReply } from '../writes/bulk-write.service.js';

/** MongoDB 8.0's bulkWrite under `/v1/admin`, writes to several namespaces in one request; and currentOp. */
@Controller('v1/admin')
export class BulkWriteController {
  constructor(
    private readonly bulk: BulkWriteService,
    private readonly ops: CurrentOps,
  ) {}

  @Post('bulkWrite')
  @HttpCode(200)
  bulkWrite(@Body() body: unknown): Promise<BulkWriteReply> {
    const request = parseWith(bulkWriteBodySchema, body, 'bulkWrite request');
    return this.ops.run({ op: 'command', command: 'bulkWrite', ns: 'admin.$cmd', body: request }, () => this.bulk.bulkWrite(request));
  }

  /** MongoDB's currentOp: this router's operations in progress, with their comments. */
  @Get('currentOp')
  currentOp(): { inprog: CurrentOpEntry[]; ok: 1 } {
    return { inprog: this.ops.list(), ok: 1 };
  }
}
