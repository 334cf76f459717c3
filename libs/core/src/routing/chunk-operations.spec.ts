import { MaxKey, MinKey } from 'bson';
import { describe, expect, it } from 'vitest';
import { TesseraError } from '../errors.js';
import type { CollectionGeneration } from '../versions/chunk-version.js';
import { shardAtClusterTime } from './chunk.js';
import type { Chunk } from './chunk.js';
import {
  chunkHistoryWindowSecs,
  createInitialChunks,
  mergeChunks,
  moveChunk,
  refineChunks,
  splitChunk,
  trimChunkHistory,
} from './chunk-operations.js';

const GEN: CollectionGeneration = { epoch: '65a000000000000000000001', timestamp: { t: 1, i: 0 } };
const NEW_GEN: CollectionGeneration = { epoch: '65a000000000000000000002', timestamp: { t: 9, i: 0 } };
const at = (t: number) => ({ t, i: 0 });
const mm = (c: Chunk) => `${c.version.major}|${c.version.minor}`;

/** Builds the chunks of a collection split at `points` over one field, round-robin on `shards`. */
function buildChunks(points: number[], shards = ['A']): Chunk[] {
  return createInitialChunks({
    generation: GEN,
    keySpace: { min: [new MinKey()], max: [new MaxKey()] },
    splitPoints: points.map((p) => [p]),
    shards,
    at: at(1),
  });
}

describe('createInitialChunks', () => {
  it('makes one chunk at 1|0 over the whole key space', () => {
    const [only, ...rest] = buildChunks([]);
    expect(rest).toEqual([]);
    expect(mm(only as Chunk)).toBe('1|0');
    expect(only?.history).toEqual([{ validAfter: at(1), shard: 'A' }]);
  });

  it('pre-splits into chunks 1|0, 1|1, ... placed round-robin', () => {
    const chunks = buildChunks([0, 10], ['A', 'B']);
    expect(chunks.map(mm)).toEqual(['1|0', '1|1', '1|2']);
    expect(chunks.map((c) => c.shard)).toEqual(['A', 'B', 'A']);
  });

  it('refuses an empty shard list', () => {
    expect(() => buildChunks([], [])).toThrow(TesseraError);
  });
});

describe('splitChunk, mergeChunks, moveChunk', () => {
  it('split pieces keep the shard and the history', () => {
    const [chunk] = buildChunks([]);
    const pieces = splitChunk(chunk as Chunk, [[5]], (chunk as Chunk).version);
    expect(pieces.map(mm)).toEqual(['1|1', '1|2']);
    expect(pieces.every((p) => p.shard === 'A' && p.history === (chunk as Chunk).history)).toBe(true);
  });

  it('a move records the recipient in the history, newest first', () => {
    const [chunk] = buildChunks([]);
    const { moved, control } = moveChunk(chunk as Chunk, 'B', (chunk as Chunk).version, at(7));
    expect(control).toBeUndefined();
    expect(moved.history).toEqual([
      { validAfter: at(7), shard: 'B' },
      { validAfter: at(1), shard: 'A' },
    ]);
    expect(shardAtClusterTime(moved, at(6))).toBe('A');
  });

  it('refuses a control chunk on another shard and operations across generations', () => {
    const chunks = buildChunks([0, 10], ['A', 'B']);
    const cv = chunks[2]?.version as Chunk['version'];
    expect(() => moveChunk(chunks[0] as Chunk, 'B', cv, at(3), chunks[1])).toThrow(TesseraError);
    expect(() => splitChunk(chunks[0] as Chunk, [[-5]], { ...cv, epoch: NEW_GEN.epoch })).toThrow(
      expect.objectContaining({ code: 'STALE_EPOCH' }),
    );
    expect(() => mergeChunks([chunks[0] as Chunk], cv, at(3))).toThrow(TesseraError);
  });
});

describe('refineChunks', () => {
  it('keeps Mi|mi, takes the new epoch and extends bounds with MinKey, or MaxKey after MaxKey', () => {
    const chunks = buildChunks([10]);
    const refined = refineChunks(chunks, NEW_GEN, 1);
    expect(refined.map(mm)).toEqual(chunks.map(mm));
    expect(refined.every((c) => c.version.epoch === NEW_GEN.epoch)).toBe(true);
    expect(refined[0]?.range).toEqual({ min: [new MinKey(), new MinKey()], max: [10, new MinKey()] });
    expect(refined[1]?.range).toEqual({ min: [10, new MinKey()], max: [new MaxKey(), new MaxKey()] });
  });

  it('refuses to keep the old epoch', () => {
    expect(() => refineChunks(buildChunks([]), GEN, 1)).toThrow(TesseraError);
  });
});

describe('trimChunkHistory', () => {
  const entry = (t: number, shard: string) => ({ validAfter: { t, i: 0 }, shard });
  // Newest first: shard2 since 1000, shard1 from 500 to 1000, shard0 from 100 to 500.
  const history = [entry(1000, 'shard2'), entry(500, 'shard1'), entry(100, 'shard0')];

  it('keeps every owner a read inside the window may ask for, the one at its start included', () => {
    // Window [700, 1000]: shard1 owned the chunk at 700, shard0 no longer matters.
    const trimmed = trimChunkHistory(history, { t: 1000, i: 0 }, 300);
    expect(trimmed.map((e) => e.shard)).toEqual(['shard2', 'shard1']);
    expect(shardAtClusterTime({ history: trimmed } as unknown as Chunk, { t: 700, i: 0 })).toBe('shard1');
  });

  it('keeps the newest entry whatever the window, and everything while it is long enough', () => {
    expect(trimChunkHistory(history, { t: 5000, i: 0 }, 10).map((e) => e.shard)).toEqual(['shard2']);
    expect(trimChunkHistory(history, { t: 1000, i: 0 }, 600)).toBe(history);
  });

  it("takes MongoDB's window: the largest of the snapshot window, the transaction lifetime and 10 s", () => {
    expect(chunkHistoryWindowSecs(300, 60)).toBe(300);
    expect(chunkHistoryWindowSecs(0, 60)).toBe(60);
    expect(chunkHistoryWindowSecs(0, 0)).toBe(10);
  });
});
