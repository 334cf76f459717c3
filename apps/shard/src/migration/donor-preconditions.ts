import { Injectable } from '@nestjs/common';
import { IGNORED_VERSION, TesseraError, type ChunkRange, chunkRangeToString, encodeKey, rangesEqual } from '@tessera/core';
import { type DonorMoveRangeRequest, type RecvChunkStartRequest, chunkRangeFromWire } from '@tessera/protocol';
import { ChunkSizingService } from '../chunks/chunk-sizing.service.js';
import { CollectionStorageService, tableName } from '../collections/collection-storage.service.js';
import { ShardingRuntime } from '../sharding/sharding-runtime.service.js';
import { MigrationPeers } from './migration-peers.js';

/** What the donor learned checking a request: the range to donate, where it is stored, and how big it is. */
export interface DonorPlan {
  shard: string;
  collectionUuid: string;
  keyPattern: RecvChunkStartRequest['keyPattern'];
  collectionVersion: { epoch: string; timestamp: { t: number; i: number } };
  shardVersion: unknown;
  range: ChunkRange;
  table: string;
  min: Buffer;
  max: Buffer;
  size: { documents: number; bytes: number };
}

/**
 * The donor's first phase (MongoDB's MigrationSourceManager constructor), against freshly loaded
 * metadata: the collection is the sharded one the config server meant, the range is exactly one
 * chunk this shard owns, and it is not over twice the max chunk size unless `forceJumbo`.
 */
@Injectable()
export class DonorPreconditions {
  constructor(
    private readonly peers: MigrationPeers,
    private readonly runtime: ShardingRuntime,
    private readonly storage: CollectionStorageService,
    private readonly sizing: ChunkSizingService,
  ) {}

  /** The shard's name, then `ready` (recovery), then the checks; throws what the request cannot do. */
  async check(request: DonorMoveRangeRequest, ready: Promise<void> | undefined): Promise<DonorPlan> {
    const shard = await this.peers.shardName();
    await ready;
    const state = await this.runtime.state();
    state.invalidate(request.ns);
    const metadata = await state.checkShardVersion(request.ns, IGNORED_VERSION);
    const info = metadata.info;
    if (info.kind !== 'sharded' || info.uuid !== request.collectionUuid) {
      throw new TesseraError('STALE_CONFIG', `${request.ns} is not the sharded collection ${request.collectionUuid} this shard knows`, {
        details: { ns: request.ns },
      });
    }
    const range = chunkRangeFromWire(request.range);
    const min = Buffer.from(encodeKey(range.min));
    const max = Buffer.from(encodeKey(range.max));
    const chunk = info.table.chunkFor(min);
    if (chunk.shard !== shard || !rangesEqual(chunk.range, range)) {
      throw new TesseraError(
        'BAD_VALUE',
        `${chunkRangeToString(range)} of ${request.ns} is not a chunk owned by ${shard} (the chunk there is ${chunkRangeToString(chunk.range)} on ${chunk.shard})`,
        { details: { ns: request.ns, problem: 'notOwnedChunk' } },
      );
    }
    if ((await this.storage.localCollection(request.ns))?.uuid !== info.uuid) {
      await this.storage.createCollection(info.uuid, { ns: request.ns, keyPattern: info.keyPatternObject });
    }
    const size = await this.checkSize(request, range);
    return {
      shard,
      collectionUuid: info.uuid,
      keyPattern: info.keyPatternObject,
      collectionVersion: info.table.collectionVersion,
      shardVersion: metadata.shardVersion,
      range,
      table: tableName(info.uuid),
      min,
      max,
      size,
    };
  }

  private async checkSize(request: DonorMoveRangeRequest, range: ChunkRange): Promise<{ documents: number; bytes: number }> {
    const measured = await this.sizing.dataSize({ ns: request.ns, range: request.range });
    const size = { documents: measured.numObjects, bytes: measured.size };
    if (!request.forceJumbo && size.bytes > 2 * request.maxChunkSizeBytes) {
      throw new TesseraError(
        'CHUNK_TOO_BIG',
        `the chunk ${chunkRangeToString(range)} of ${request.ns} holds ${size.bytes} bytes in ${size.documents} documents, over twice the max chunk size of ${request.maxChunkSizeBytes} bytes; split it, or move it with forceJumbo`,
        { details: { ns: request.ns, bytes: size.bytes, documents: size.documents, maxChunkSizeBytes: request.maxChunkSizeBytes } },
      );
    }
    return size;
  }
}
