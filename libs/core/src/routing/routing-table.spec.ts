import { MaxKey, MinKey } from 'bson';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TesseraError } from '../errors.js';
import { encodeKey } from '../keys/key-encoding.js';
import type { ShardKey } from '../keys/shard-key-pattern.js';
import { compareShardKeys, rangeContainsKey, validateRangeCoverage } from '../ranges/chunk-range.js';
import type { Value } from '../values/value.js';
import type { ChunkVersion, CollectionGeneration } from '../versions/chunk-version.js';
import { compareChunkVersions, zeroVersionOf } from '../versions/chunk-version.js';
import type { Chunk, ShardId } from './chunk.js';
import { createInitialChunks, mergeChunks, moveChunk, splitChunk } from './chunk-operations.js';
import { RoutingTable } from './routing-table.js';

const GEN: CollectionGeneration = { epoch: '65a000000000000000000001', timestamp: { t: 1, i: 0 } };
const OTHER_GEN: CollectionGeneration = { epoch: '65a000000000000000000002', timestamp: { t: 2, i: 0 } };
const KEY_SPACE = { min: [new MinKey()], max: [new MaxKey()] };
const at = (t: number) => ({ t, i: 0 });

/** Builds a table over one integer field split at `points`, chunks placed round-robin on `shards`. */
function buildTable(options: { points?: number[]; shards?: ShardId[]; blockSize?: number } = {}): RoutingTable {
  const chunks = createInitialChunks({
    generation: GEN,
    keySpace: KEY_SPACE,
    splitPoints: (options.points ?? []).map((p) => [p]),
    shards: options.shards ?? ['shardA'],
    at: at(1),
  });
  return RoutingTable.fromChunks(chunks, { blockSize: options.blockSize ?? 4 });
}

const mm = (v: ChunkVersion) => `${v.major}|${v.minor}`;

describe('RoutingTable.fromChunks', () => {
  it('finds the chunk of a key by binary search, MinKey and the last chunk included', () => {
    const table = buildTable({ points: [10, 20, 30], shards: ['A', 'B'] });
    expect(table.size).toBe(4);
    expect(table.chunkFor([new MinKey()]).range.max).toEqual([10]);
    expect(table.chunkFor([9.5]).range.max).toEqual([10]);
    expect(table.chunkFor([10]).range.min).toEqual([10]);
    expect(table.chunkFor(['a string sorts above numbers']).range.min).toEqual([30]);
    expect(table.chunkFor(encodeKey([25])).range.min).toEqual([20]);
    expect(table.shardFor([15])).toBe('B');
  });

  it('answers SHARD_KEY_NOT_FOUND for an all-MaxKey key and BAD_VALUE for a key of the wrong arity', () => {
    const table = buildTable({ points: [10] });
    expect(() => table.chunkFor([new MaxKey()])).toThrow(expect.objectContaining({ code: 'SHARD_KEY_NOT_FOUND' }));
    expect(() => table.chunkFor([1, 2])).toThrow(expect.objectContaining({ code: 'BAD_VALUE' }));
  });

  it('keeps the collection version and the shard versions', () => {
    const table = buildTable({ points: [10, 20, 30], shards: ['A', 'B'] });
    expect(mm(table.collectionVersion)).toBe('1|3');
    expect(mm(table.shardVersion('A'))).toBe('1|2');
    expect(mm(table.shardVersion('B'))).toBe('1|3');
    expect(table.shardVersion('C')).toEqual(zeroVersionOf(GEN));
    expect(table.shardIds()).toEqual(['A', 'B']);
    expect(table.chunkCountOnShard('A')).toBe(2);
    expect(table.chunksOnShard('B').map((c) => c.range.min)).toEqual([[10], [30]]);
  });

  it('lists the chunks overlapping a range, and their shards', () => {
    const table = buildTable({ points: [10, 20, 30], shards: ['A', 'B', 'C'] });
    expect(table.chunksOverlapping({ min: [10], max: [20] }).map((c) => c.range.min)).toEqual([[10]]);
    expect(table.chunksOverlapping({ min: [15], max: [25] }).map((c) => c.range.min)).toEqual([[10], [20]]);
    expect(table.chunksOverlapping(KEY_SPACE)).toHaveLength(4);
    expect(table.shardsForRange({ min: [5], max: [25] })).toEqual(['A', 'B', 'C']);
  });

  it.each([
    { problem: 'gap', drop: 1 },
    { problem: 'start', drop: 0 },
    { problem: 'end', drop: 3 },
  ])('refuses chunks with a $problem with CONFLICTING_OPERATION', ({ problem, drop }) => {
    const chunks = buildTable({ points: [10, 20, 30] })
      .chunks()
      .filter((_, i) => i !== drop);
    expect(() => RoutingTable.fromChunks(chunks)).toThrow(
      expect.objectContaining({ code: 'CONFLICTING_OPERATION', details: expect.objectContaining({ problem }) }),
    );
  });

  it('refuses overlapping chunks and mixed generations', () => {
    const chunks = buildTable({ points: [10, 20] }).chunks();
    const overlapping = [...chunks, { ...(chunks[1] as Chunk), range: { min: [15], max: [25] } }];
    expect(() => RoutingTable.fromChunks(overlapping)).toThrow(expect.objectContaining({ code: 'CONFLICTING_OPERATION' }));
    const mixed = [chunks[0] as Chunk, { ...(chunks[1] as Chunk), version: { ...OTHER_GEN, major: 1, minor: 1 } }, chunks[2] as Chunk];
    expect(() => RoutingTable.fromChunks(mixed)).toThrow(expect.objectContaining({ code: 'STALE_EPOCH' }));
  });

  it('accepts chunks in any order', () => {
    const chunks = buildTable({ points: [10, 20, 30] }).chunks();
    expect(RoutingTable.fromChunks([...chunks].reverse()).chunks()).toEqual(chunks);
  });
});

describe('RoutingTable.applyChanges', () => {
  it('applies a split, bumping the collection version and the shard version', () => {
    const table = buildTable({ points: [10], shards: ['A', 'B'] });
    const pieces = splitChunk(table.chunkFor([5]), [[0], [5]], table.collectionVersion);
    const next = table.applyChanges(pieces);
    expect(next.size).toBe(4);
    expect(mm(next.collectionVersion)).toBe('1|4');
    expect(mm(next.shardVersion('A'))).toBe('1|4');
    expect(mm(table.collectionVersion)).toBe('1|1');
    expect(table.size).toBe(2);
  });

  it('applies a move with a control chunk, and without one drops the donor to 0|0', () => {
    const table = buildTable({ points: [10, 20], shards: ['A', 'A', 'B'] });
    const cv = table.collectionVersion;
    const withControl = moveChunk(table.chunkFor([5]), 'B', cv, at(5), table.chunkFor([15]));
    const next = table.applyChanges([withControl.moved, withControl.control as Chunk]);
    expect(mm(next.shardVersion('B'))).toBe('2|0');
    expect(mm(next.shardVersion('A'))).toBe('2|1');
    const lastMove = moveChunk(next.chunkFor([15]), 'B', next.collectionVersion, at(6));
    const after = next.applyChanges([lastMove.moved]);
    expect(after.shardVersion('A')).toEqual(zeroVersionOf(GEN));
    expect(mm(after.shardVersion('B'))).toBe('3|0');
    expect(after.shardIds()).toEqual(['B']);
  });

  it('gives an equal table when an incremental refresh re-sends unchanged chunks, the top chunk included', () => {
    const table = buildTable({ points: [10, 20, 30], shards: ['A', 'B'] });
    const next = table.applyChanges(table.chunks().slice(2));
    expect(next.chunks()).toEqual(table.chunks());
    expect(next.shardVersions()).toEqual(table.shardVersions());
    expect(next.collectionVersion).toEqual(table.collectionVersion);
  });

  it('refuses chunks of another epoch with STALE_EPOCH', () => {
    const table = buildTable({ points: [10] });
    const foreign = { ...table.chunkFor([5]), version: { ...OTHER_GEN, major: 5, minor: 0 } };
    expect(() => table.applyChanges([foreign])).toThrow(expect.objectContaining({ code: 'STALE_EPOCH' }));
  });

  it.each([
    { name: 'a changed chunk that ends inside an existing chunk', ranges: [[new MinKey(), 5]] as Value[][] },
    { name: 'a changed chunk that starts inside an existing chunk', ranges: [[5, 10]] as Value[][] },
    {
      name: 'changed chunks that overlap each other',
      ranges: [
        [new MinKey(), 10],
        [5, 10],
      ] as Value[][],
    },
  ])('refuses $name with CONFLICTING_OPERATION', ({ ranges }) => {
    const table = buildTable({ points: [10] });
    const base = table.chunkFor([5]);
    const changes = ranges.map(([min, max], k) => ({
      ...base,
      range: { min: [min as Value], max: [max as Value] },
      version: { ...GEN, major: 9, minor: k },
    }));
    expect(() => table.applyChanges(changes)).toThrow(expect.objectContaining({ code: 'CONFLICTING_OPERATION' }));
  });
});

describe('chunk history', () => {
  it('answers which shard owned a key at a past cluster time', () => {
    const table = buildTable({ points: [10], shards: ['A', 'B'] });
    const moved = moveChunk(table.chunkFor([5]), 'B', table.collectionVersion, at(10)).moved;
    const next = table.applyChanges([moved]);
    expect(next.chunkFor([5]).shard).toBe('B');
    expect(next.chunkFor([5], at(10)).shard).toBe('B');
    expect(next.chunkFor([5], at(9)).shard).toBe('A');
    expect(next.shardsForRange({ min: [0], max: [20] }, at(5))).toEqual(['A', 'B']);
  });

  it('says STALE_CHUNK_HISTORY before the oldest entry, and after a merge reset the history', () => {
    const table = buildTable({ points: [10, 20] });
    expect(() => table.chunkFor([5], at(0))).toThrow(expect.objectContaining({ code: 'STALE_CHUNK_HISTORY' }));
    const merged = mergeChunks(table.chunks().slice(0, 2), table.collectionVersion, at(50));
    const next = table.applyChanges([merged]);
    expect(next.chunkFor([5], at(50)).shard).toBe('shardA');
    expect(() => next.chunkFor([5], at(49))).toThrow(expect.objectContaining({ code: 'STALE_CHUNK_HISTORY' }));
  });
});

type Op = { kind: 'split' | 'merge' | 'move'; pick: number; pick2: number; shard: number };

const arbOp: fc.Arbitrary<Op> = fc.record({
  kind: fc.constantFrom('split', 'split', 'merge', 'move', 'move') as fc.Arbitrary<Op['kind']>,
  pick: fc.nat(),
  pick2: fc.nat(),
  shard: fc.nat({ max: 3 }),
});

const SHARDS = ['s0', 's1', 's2', 's3'];

function numericBound(value: Value, fallback: number): number {
  return typeof value === 'number' ? value : fallback;
}

/** Turns an op into the changed chunks it commits, or undefined when it does not apply. */
function changesFor(table: RoutingTable, op: Op, time: number): Chunk[] | undefined {
  const chunks = table.chunks();
  const chunk = chunks[op.pick % chunks.length] as Chunk;
  const cv = table.collectionVersion;
  switch (op.kind) {
    case 'split': {
      const lo = numericBound(chunk.range.min[0] as Value, -1000);
      const hi = numericBound(chunk.range.max[0] as Value, 1000);
      if (hi - lo < 2) return undefined;
      const count = 1 + (op.pick2 % 3);
      const points = [...new Set(Array.from({ length: count }, (_, k) => lo + 1 + ((op.pick2 * (k + 7)) % (hi - lo - 1))))].sort(
        (a, b) => a - b,
      );
      return splitChunk(
        chunk,
        points.map((p) => [p]),
        cv,
      );
    }
    case 'merge': {
      const start = op.pick % chunks.length;
      const group = chunks.slice(start, start + 2 + (op.pick2 % 2));
      if (group.length < 2 || group.some((c) => c.shard !== chunk.shard)) return undefined;
      return [mergeChunks(group, cv, at(time))];
    }
    case 'move': {
      const to = SHARDS[op.shard] as ShardId;
      if (to === chunk.shard) return undefined;
      const control = chunks.find((c) => c.shard === chunk.shard && c !== chunk);
      const { moved, control: bumped } = moveChunk(chunk, to, cv, at(time), control);
      return bumped ? [moved, bumped] : [moved];
    }
  }
}

/** The naive model: replace every chunk overlapping a changed chunk, then sort. */
function applyNaively(chunks: readonly Chunk[], changes: readonly Chunk[]): Chunk[] {
  const kept = chunks.filter(
    (c) => !changes.some((x) => compareShardKeys(c.range.min, x.range.max) < 0 && compareShardKeys(x.range.min, c.range.max) < 0),
  );
  return [...kept, ...changes].sort((a, b) => compareShardKeys(a.range.min, b.range.min));
}

function naiveShardVersion(chunks: readonly Chunk[], shard: ShardId): ChunkVersion {
  return chunks
    .filter((c) => c.shard === shard)
    .reduce((top, c) => (compareChunkVersions(c.version, top) === 'newer' ? c.version : top), zeroVersionOf(GEN));
}

describe('RoutingTable under random splits, merges and moves', () => {
  it('keeps full coverage, strictly increasing collection versions, correct shard versions, and equals a full rebuild', () => {
    fc.assert(
      fc.property(
        fc.array(arbOp, { minLength: 1, maxLength: 60 }),
        fc.integer({ min: 2, max: 8 }),
        fc.array(fc.integer({ min: -1100, max: 1100 }), { maxLength: 20 }),
        (ops, blockSize, probes) => {
          let table = buildTable({ points: [-500, 0, 500], shards: ['s0', 's1'], blockSize });
          let model = table.chunks();
          let time = 2;
          for (const op of ops) {
            const changes = changesFor(table, op, time++);
            if (changes === undefined) continue;
            const before = table.collectionVersion;
            table = table.applyChanges(changes);
            model = applyNaively(model, changes);
            expect(compareChunkVersions(table.collectionVersion, before)).toBe('newer');
          }
          const chunks = table.chunks();
          expect(chunks).toEqual(model);
          validateRangeCoverage(
            chunks.map((c) => c.range),
            KEY_SPACE,
          );
          for (const shard of SHARDS) expect(table.shardVersion(shard)).toEqual(naiveShardVersion(model, shard));
          const rebuilt = RoutingTable.fromChunks(model, { blockSize });
          expect(rebuilt.chunks()).toEqual(chunks);
          expect(rebuilt.collectionVersion).toEqual(table.collectionVersion);
          expect(rebuilt.shardVersions()).toEqual(table.shardVersions());
          for (const shard of SHARDS) expect(rebuilt.chunkCountOnShard(shard)).toBe(table.chunkCountOnShard(shard));
          for (const probe of probes) {
            const key: ShardKey = [probe];
            expect(table.chunkFor(key)).toBe(model.find((c) => rangeContainsKey(c.range, key)));
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('gives the same table as a full rebuild for arbitrary re-partitions of random ranges', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: -200, max: 200 }), { minLength: 1, maxLength: 60 }),
        fc.nat(),
        fc.nat(),
        fc.array(fc.integer({ min: -200, max: 200 }), { maxLength: 5 }),
        (points, from, span, newPoints) => {
          const table = buildTable({ points: [...points].sort((a, b) => a - b), shards: SHARDS, blockSize: 3 });
          const chunks = table.chunks();
          const start = from % chunks.length;
          const replaced = chunks.slice(start, start + 1 + (span % 8));
          const min = (replaced[0] as Chunk).range.min;
          const max = (replaced[replaced.length - 1] as Chunk).range.max;
          const inner = [...new Set(newPoints)]
            .filter((p) => compareShardKeys(min, [p]) < 0 && compareShardKeys([p], max) < 0)
            .sort((a, b) => a - b);
          const bounds: ShardKey[] = [min, ...inner.map((p) => [p]), max];
          const cv = table.collectionVersion;
          const changes: Chunk[] = bounds.slice(1).map((hi, k) => ({
            range: { min: bounds[k] as ShardKey, max: hi },
            shard: SHARDS[k % SHARDS.length] as ShardId,
            version: { ...GEN, major: cv.major + 1, minor: k },
            history: [{ validAfter: at(9), shard: SHARDS[k % SHARDS.length] as ShardId }],
          }));
          const incremental = table.applyChanges(changes);
          const full = RoutingTable.fromChunks(applyNaively(chunks, changes));
          expect(incremental.chunks()).toEqual(full.chunks());
          expect(incremental.shardVersions()).toEqual(full.shardVersions());
          expect(incremental.collectionVersion).toEqual(full.collectionVersion);
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('chunk operations', () => {
  it('refuse to move a chunk onto its own shard and to merge across shards', () => {
    const table = buildTable({ points: [10], shards: ['A', 'B'] });
    expect(() => moveChunk(table.chunkFor([5]), 'A', table.collectionVersion, at(3))).toThrow(TesseraError);
    expect(() => mergeChunks(table.chunks(), table.collectionVersion, at(3))).toThrow(TesseraError);
  });
});
