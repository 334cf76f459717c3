import { Body, Controller, Delete, Get, HttpCode, Param, ParseUUIDPipe, Post, Put, UseGuards } from '@nestjs/common';
import { TesseraError } from '@tessera/core';
import { ClusterAuthGuard, parseWith } from '@tessera/platform';
import { type ShardStats, keyPatternSchema } from '@tessera/protocol';
import { z } from 'zod';
import { ShardingRuntime } from '../sharding/sharding-runtime.service.js';
import { CollectionStorageService } from './collection-storage.service.js';

const refineSchema = z.strictObject({ keyPattern: keyPatternSchema });
const renameSchema = z.strictObject({ to: z.string().min(3), dropTarget: z.boolean() });

@Controller('internal')
@UseGuards(ClusterAuthGuard)
export class CollectionsController {
  constructor(
    private readonly storage: CollectionStorageService,
    private readonly runtime: ShardingRuntime,
  ) {}

  @Put('collections/:uuid')
  @HttpCode(200)
  async create(@Param('uuid', ParseUUIDPipe) uuid: string, @Body() body: unknown): Promise<{ ok: 1 }> {
    await this.storage.createCollection(uuid, body as never);
    await this.forgetMetadata(await this.storage.namespaceOf(uuid));
    return { ok: 1 };
  }

  @Delete('collections/:uuid')
  async drop(@Param('uuid', ParseUUIDPipe) uuid: string): Promise<{ ok: 1 }> {
    const ns = await this.storage.namespaceOf(uuid);
    await this.storage.dropCollection(uuid);
    await this.forgetMetadata(ns);
    return { ok: 1 };
  }

  @Post('collections/:uuid/refine')
  @HttpCode(200)
  async refine(@Param('uuid', ParseUUIDPipe) uuid: string, @Body() body: unknown): Promise<{ rekeyed: number }> {
    const { keyPattern } = parseWith(refineSchema, body, 'refine request');
    const ns = await this.storage.namespaceOf(uuid);
    if (ns === undefined) return { rekeyed: 0 };
    // Commands resolve the collection's key pattern from the stored one, which the re-key changes:
    // in a critical section, no command keyed by the old pattern is under way or starts meanwhile.
    const section = await this.runtime.enterCriticalSection(ns, 'refineCollectionShardKey');
    try {
      section.blockReads();
      return { rekeyed: await this.storage.refineShardKey(uuid, keyPattern) };
    } finally {
      section.release();
    }
  }

  /**
   * Renames the unsharded collection `uuid` (renameCollection's phase on the database's primary),
   * under the critical sections of both names, so no command on either runs across the rename.
   */
  @Post('collections/:uuid/rename')
  @HttpCode(200)
  async rename(@Param('uuid', ParseUUIDPipe) uuid: string, @Body() body: unknown): Promise<{ renamed: boolean }> {
    const { to, dropTarget } = parseWith(renameSchema, body, 'rename request');
    const from = await this.storage.namespaceOf(uuid);
    if (from === undefined || from === to) return { renamed: from === to };
    const sections = [];
    try {
      for (const ns of [from, to].sort()) sections.push(await this.runtime.enterCriticalSection(ns, 'renameCollection'));
      for (const section of sections) section.blockReads();
      const renamed = await this.storage.renameCollection(uuid, to, dropTarget);
      await this.forgetMetadata(from);
      await this.forgetMetadata(to);
      return { renamed };
    } finally {
      for (const section of sections) section.release();
    }
  }

  @Get('namespaces/:ns')
  async describeNamespace(@Param('ns') ns: string): Promise<{ uuid: string; keyPattern: Record<string, 1 | 'hashed'>; documents: number }> {
    const found = await this.storage.describeNamespace(ns);
    if (found === undefined) throw new TesseraError('NAMESPACE_NOT_FOUND', `this shard stores no collection ${ns}`, { details: { ns } });
    return found;
  }

  @Delete('namespaces/:ns')
  async dropNamespace(@Param('ns') ns: string): Promise<{ dropped: boolean }> {
    return { dropped: await this.storage.dropNamespace(ns) };
  }

  @Get('databases/:db/namespaces')
  async namespacesOf(@Param('db') db: string): Promise<{ namespaces: string[] }> {
    return { namespaces: await this.storage.namespacesOf(db) };
  }

  @Delete('databases/:db')
  async dropDatabase(@Param('db') db: string): Promise<{ dropped: number }> {
    return { dropped: await this.storage.dropDatabase(db) };
  }

  @Get('stats')
  stats(): Promise<ShardStats> {
    return this.storage.stats();
  }

  /**
   * After a collection of `ns` is created or dropped here, the shard's routing metadata of `ns`
   * may describe the previous collection of that name: forgotten, the next command refreshes it,
   * and one sent with the old collection's version is answered STALE_CONFIG instead of writing
   * into (or re-creating) the old collection.
   */
  private async forgetMetadata(ns: string | undefined): Promise<void> {
    if (ns === undefined) return;
    // A shard not yet added to a cluster has no metadata to forget.
    const state = await this.runtime.state().catch((error: unknown) => {
      if (error instanceof TesseraError && error.code === 'ILLEGAL_OPERATION') return undefined;
      throw error;
    });
    state?.invalidate(ns);
  }
}
