import { Body, Controller, HttpCode, Post, UseGuards } from '@nestjs/common';
import { z } from 'zod';
import { ClusterAuthGuard, parseWith } from '@tessera/platform';
import type {
  CreateIndexesResult,
  CursorBatch,
  DeleteCommandResult,
  DropIndexesResult,
  FindAndModifyResult,
  ListedIndex,
  UpdateCommandResult,
} from '@tessera/protocol';
import { ShardDataService } from './shard-data.service.js';

const killCursorsSchema = z.strictObject({ cursorIds: z.array(z.string()).max(10_000) });
const refreshSchema = z.strictObject({ ns: z.string() });

/** The versioned data commands routers send, but for insert and find (`dataHotRoutes`); validation happens in the service. */
@Controller('internal/data')
@UseGuards(ClusterAuthGuard)
export class DataController {
  constructor(private readonly data: ShardDataService) {}

  @Post('aggregate')
  @HttpCode(200)
  aggregate(@Body() body: unknown): Promise<CursorBatch> {
    return this.data.aggregate(body as never);
  }

  @Post('getMore')
  @HttpCode(200)
  getMore(@Body() body: unknown): Promise<CursorBatch> {
    return this.data.getMore(body as never);
  }

  @Post('killCursors')
  @HttpCode(200)
  killCursors(@Body() body: unknown): { killed: string[]; notFound: string[] } {
    return this.data.killCursors(parseWith(killCursorsSchema, body, 'killCursors command').cursorIds);
  }

  @Post('update')
  @HttpCode(200)
  update(@Body() body: unknown): Promise<UpdateCommandResult> {
    return this.data.update(body as never);
  }

  @Post('delete')
  @HttpCode(200)
  delete(@Body() body: unknown): Promise<DeleteCommandResult> {
    return this.data.delete(body as never);
  }

  @Post('findAndModify')
  @HttpCode(200)
  findAndModify(@Body() body: unknown): Promise<FindAndModifyResult> {
    return this.data.findAndModify(body as never);
  }

  @Post('count')
  @HttpCode(200)
  count(@Body() body: unknown): Promise<{ n: number }> {
    return this.data.count(body as never);
  }

  @Post('refreshMetadata')
  @HttpCode(200)
  refreshMetadata(@Body() body: unknown): Promise<{ shardVersion: unknown }> {
    return this.data.refreshMetadata(parseWith(refreshSchema, body, 'refreshMetadata command').ns);
  }

  @Post('distinct')
  @HttpCode(200)
  distinct(@Body() body: unknown): Promise<{ values: unknown[] }> {
    return this.data.distinct(body as never);
  }

  @Post('createIndexes')
  @HttpCode(200)
  createIndexes(@Body() body: unknown): Promise<CreateIndexesResult> {
    return this.data.createIndexes(body as never);
  }

  @Post('listIndexes')
  @HttpCode(200)
  listIndexes(@Body() body: unknown): Promise<{ indexes: ListedIndex[] }> {
    return this.data.listIndexes(body as never);
  }

  @Post('dropIndexes')
  @HttpCode(200)
  dropIndexes(@Body() body: unknown): Promise<DropIndexesResult> {
    return this.data.dropIndexes(body as never);
  }
}
