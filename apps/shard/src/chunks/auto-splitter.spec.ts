import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { RoutingTable, createInitialChunks, encodeKey, globalMaxKey, globalMinKey, parseShardKeyPattern } from '@tessera/core';
import type { ConfigClient, RecordChunkSizeEstimateRequest, SplitVectorRequest } from '@tessera/protocol';
import type { InternalClients } from '@tessera/platform';
import type { ShardIdentityService } from '../identity/shard-identity.service.js';
import type { ShardingRuntime } from '../sharding/sharding-runtime.service.js';
import type { FilteringMetadata } from '../sharding/sharding-state.js';
import { AutoSplitter } from './auto-splitter.service.js';
import type { SplitVectorService } from './split-vector.service.js';

const MAX_CHUNK_SIZE = 1_000;
const ns = 'db.c';
const pattern = parseShardKeyPattern({ x: 1 });

/** Metadata of `db.c` in one chunk on shard s0, at the given major version. */
function metadata(major: number): FilteringMetadata {
  const at = { t: 1, i: 1 };
  const [chunk] = createInitialChunks({
    generation: { epoch: 'a'.repeat(24), timestamp: at },
    keySpace: { min: globalMinKey(pattern), max: globalMaxKey(pattern) },
    splitPoints: [],
    shards: ['s0'],
    at,
  });
  const moved = { ...chunk!, version: { ...chunk!.version, major } };
  const table = RoutingTable.fromChunks([moved]);
  return {
    info: { kind: 'sharded', ns, uuid: 'u', keyPattern: pattern, keyPatternObject: { x: 1 }, table },
    shardVersion: moved.version,
    owns: () => true,
    ownsAt: () => true,
    ownedRanges: () => 'all',
  };
}

/**
 * An auto-splitter whose splitVector measures `stored()` bytes in 10 documents and finds the
 * split points `splitKeys()` (none by default); `reports` are the size estimates it sends.
 */
function splitter(stored: () => number, splitKeys: () => unknown[][] = () => []) {
  const tests: SplitVectorRequest[] = [];
  const reports: RecordChunkSizeEstimateRequest[] = [];
  const splits: unknown[] = [];
  const sizing = {
    splitVectorSized: async (request: SplitVectorRequest) => {
      tests.push(request);
      return { result: { splitKeys: splitKeys(), unsplittable: false }, size: { size: stored(), numObjects: 10 } };
    },
    edgeKey: async () => undefined,
  } as unknown as SplitVectorService;
  const config = {
    getCollection: async () => ({}),
    settings: async () => ({ chunkSizeBytes: MAX_CHUNK_SIZE, autoSplit: true }),
    recordChunkSizeEstimate: async (request: RecordChunkSizeEstimateRequest) => {
      reports.push(request);
      return { ok: 1 };
    },
    commitSplit: async (request: unknown) => {
      splits.push(request);
      return { chunks: [] };
    },
  } as unknown as ConfigClient;
  const auto = new AutoSplitter(
    { state: async () => ({ invalidate: () => undefined }) } as unknown as ShardingRuntime,
    sizing,
    { get: async () => ({ configUrl: 'http://config' }) } as unknown as ShardIdentityService,
    { config: () => config } as unknown as InternalClients,
    pino({ level: 'silent' }),
  );
  return { auto, tests, reports, splits };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 5));
const key = Buffer.from(encodeKey([1]));

describe('the auto-splitter', () => {
  it('tests a chunk at each fifth of the max written, skipping tests its last measurement plus the writes since rule out', async () => {
    let stored = 0;
    const { auto, tests } = splitter(() => stored);
    const view = metadata(1);
    auto.noteWrite(ns, view, key, 0); // reads the max chunk size
    await settle();
    const write = async (bytes: number) => {
      stored += bytes;
      auto.noteWrite(ns, view, key, bytes);
      await settle();
    };
    await write(200);
    expect(tests).toHaveLength(1); // measured 200
    await write(200); // at most 400
    await write(200); // at most 600
    await write(200); // at most 800
    expect(tests).toHaveLength(1);
    await write(200); // at most 1,000: the max, so it is measured
    expect(tests).toHaveLength(2);
    await write(200); // measured 1,000 (no split point found), at most 1,200
    expect(tests).toHaveLength(3);
  });

  it('measures a chunk again once a split, merge or migration gave it a new version', async () => {
    const { auto, tests } = splitter(() => 200);
    auto.noteWrite(ns, metadata(1), key, 0);
    await settle();
    auto.noteWrite(ns, metadata(1), key, 200);
    await settle();
    auto.noteWrite(ns, metadata(1), key, 200);
    await settle();
    expect(tests).toHaveLength(1);
    auto.noteWrite(ns, metadata(2), key, 200);
    await settle();
    expect(tests).toHaveLength(2);
  });

  it('reports what a test measured in a chunk it leaves whole, bytes and documents, to the catalog', async () => {
    const { auto, reports } = splitter(() => 300);
    const view = metadata(1);
    auto.noteWrite(ns, view, key, 0);
    await settle();
    auto.noteWrite(ns, view, key, 200);
    await settle();
    expect(reports).toEqual([
      {
        ns,
        generation: { epoch: 'a'.repeat(24), timestamp: { t: 1, i: 1 } },
        range: { min: [{ $minKey: 1 }], max: [{ $maxKey: 1 }] },
        estimatedSizeBytes: 300,
        estimatedDocuments: 10,
      },
    ]);
  });

  it('reports nothing for a chunk it splits: the pieces are measured at their own tests', async () => {
    const { auto, splits, reports } = splitter(
      () => 2_000,
      () => [[{ $numberInt: '5' }]],
    );
    const view = metadata(1);
    auto.noteWrite(ns, view, key, 0);
    await settle();
    auto.noteWrite(ns, view, key, 200);
    await settle();
    expect(splits).toHaveLength(1);
    expect(reports).toEqual([]);
  });
});
