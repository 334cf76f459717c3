import { Body, Controller, HttpCode, Post, UseGuards } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { z } from 'zod';
import { ClusterAuthGuard, parseWith } from '@tessera/platform';
import { namespaceSchema, shardNameSchema } from '@tessera/protocol';
import { ChangelogService } from './changelog.service.js';

const reportSchema = z.strictObject({
  what: z.string().regex(/^[A-Za-z]+(\.[A-Za-z]+)*$/, 'must be a dotted name such as moveChunk.phase'),
  ns: namespaceSchema.optional(),
  shard: shardNameSchema.optional(),
  details: z.record(z.string(), z.unknown()).optional(),
});

/** What shards report for the changelog: migration phases and progress, range deletions. */
@Controller('internal/changelog')
@UseGuards(ClusterAuthGuard)
export class ChangelogController {
  constructor(
    private readonly dataSource: DataSource,
    private readonly changelog: ChangelogService,
  ) {}

  @Post()
  @HttpCode(200)
  async report(@Body() body: unknown): Promise<{ ok: 1 }> {
    const entry = parseWith(reportSchema, body, 'changelog report');
    await this.changelog.record(this.dataSource.manager, {
      what: entry.what,
      ...(entry.ns !== undefined ? { ns: entry.ns } : {}),
      ...(entry.shard !== undefined ? { shard: entry.shard } : {}),
      ...(entry.details !== undefined ? { details: entry.details } : {}),
    });
    return { ok: 1 };
  }
}
