import { Body, Controller, Get, HttpCode, Param, Post, UseGuards } from '@nestjs/common';
import { ClusterAuthGuard } from '@tessera/platform';
import type { CatalogCollection, CatalogDatabase, CommitResult, GetChunksResult } from '@tessera/protocol';
import { CatalogReadService } from './catalog-read.service.js';
import { MetadataCommitService } from './metadata-commit.service.js';

/**
 * The catalog's internal API: routing reads for routers and shards, metadata commits for shards
 * (split, migration) and the config leader (merge, jumbo). Bodies are validated by the services.
 */
@Controller('internal/catalog')
@UseGuards(ClusterAuthGuard)
export class CatalogController {
  constructor(
    private readonly reads: CatalogReadService,
    private readonly commits: MetadataCommitService,
  ) {}

  @Get('databases/:name')
  getDatabase(@Param('name') name: string): Promise<CatalogDatabase> {
    return this.reads.getDatabase(name);
  }

  @Get('collections/:ns')
  getCollection(@Param('ns') ns: string): Promise<CatalogCollection> {
    return this.reads.getCollection(ns);
  }

  /** A read with a structured body (the cached collection version), hence POST. */
  @Post('chunks')
  @HttpCode(200)
  getChunks(@Body() body: unknown): Promise<GetChunksResult> {
    return this.reads.getChunks(body as never);
  }

  @Post('commitSplit')
  @HttpCode(200)
  commitSplit(@Body() body: unknown): Promise<CommitResult> {
    return this.commits.commitSplit(body as never);
  }

  @Post('commitMerge')
  @HttpCode(200)
  commitMerge(@Body() body: unknown): Promise<CommitResult> {
    return this.commits.commitMerge(body as never);
  }

  @Post('commitMigration')
  @HttpCode(200)
  commitMigration(@Body() body: unknown): Promise<CommitResult> {
    return this.commits.commitMigration(body as never);
  }

  @Post('clearJumbo')
  @HttpCode(200)
  clearJumbo(@Body() body: unknown): Promise<CommitResult> {
    return this.commits.clearJumbo(body as never);
  }

  @Post('markJumbo')
  @HttpCode(200)
  markJumbo(@Body() body: unknown): Promise<CommitResult> {
    return this.commits.markJumbo(body as never);
  }

  @Post('chunkSizeEstimate')
  @HttpCode(200)
  recordChunkSizeEstimate(@Body() body: unknown): Promise<{ ok: 1 }> {
    return this.commits.recordChunkSizeEstimate(body as never);
  }
}
