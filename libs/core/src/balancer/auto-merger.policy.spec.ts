import { describe, expect, it } from 'vitest';
import type { Chunk } from '../routing/chunk.js';
import { DEFAULT_AUTO_MERGER_SETTINGS } from './balancer-settings.js';
import { capRunBySize, isMergeable, findMergeableRuns, selectAutoMergeActions } from './auto-merger.policy.js';
import { layoutChunks, layoutKey } from './chunk-layout.js';

const settings = DEFAULT_AUTO_MERGER_SETTINGS;
const NOW = 10_000;

/** The reference's example: A..I of db.coll with shard key x, every chunk 10 wide. */
function referenceExample(): Chunk[] {
  return layoutChunks([
    { shard: 'Shard0', chunks: 4 }, // A B C D: x 0..40
    { shard: 'Shard1', chunks: 2 }, // E F: x 40..60
    { shard: 'Shard0', chunks: 2 }, // G H: x 60..80
    { shard: 'Shard1', chunks: 1 }, // I: x 80..90
  ]);
}
const names = 'ABCDEFGHI';
const label = (chunks: readonly Chunk[], all: readonly Chunk[]) => chunks.map((c) => names[all.indexOf(c)]).join('-');
const movedAt = (chunk: Chunk, t: number): Chunk => ({
  ...chunk,
  history: [
    { validAfter: { t, i: 0 }, shard: chunk.shard },
    { validAfter: { t: 1, i: 0 }, shard: 'elsewhere' },
  ],
});

describe('the auto-merger', () => {
  it('does not merge chunks of different zones, so a zone-boundary split is not undone', () => {
    const chunks = referenceExample();
    // B and C (x 10..30) are in zone z: A, B-C and D stay apart on Shard0.
    const zones = [{ range: { min: layoutKey(1), max: layoutKey(3) }, zone: 'z' }];
    const runs = findMergeableRuns(chunks, NOW, settings, 'Shard0', zones);
    expect(runs.map((r) => label(r.chunks, chunks))).toEqual(['B-C', 'G-H']);
    const actions = selectAutoMergeActions([{ namespace: 'db.coll', chunks: chunks.slice(0, 4), zones }], NOW, settings);
    expect(actions).toEqual([{ kind: 'mergeAllChunksOnShard', namespace: 'db.coll', shard: 'Shard0' }]);
    expect(selectAutoMergeActions([{ namespace: 'db.coll', chunks: chunks.slice(0, 2), zones }], NOW, settings)).toEqual([]);
  });

  it('merges the reference example into A-B-C-D, E-F, G-H and leaves I alone', () => {
    const chunks = referenceExample();
    const runs = findMergeableRuns(chunks, NOW, settings);
    expect(runs.map((r) => [label(r.chunks, chunks), r.shard])).toEqual([
      ['A-B-C-D', 'Shard0'],
      ['E-F', 'Shard1'],
      ['G-H', 'Shard0'],
    ]);
    expect(runs.map((r) => [r.range.min, r.range.max])).toEqual([
      [chunks[0]?.range.min, [40]],
      [[40], [60]],
      [[60], [80]],
    ]);
  });

  it('merges only the runs of the shard mergeAllChunksOnShard names', () => {
    const chunks = referenceExample();
    expect(findMergeableRuns(chunks, NOW, settings, 'Shard1').map((r) => label(r.chunks, chunks))).toEqual(['E-F']);
  });

  it('answers one mergeAllChunksOnShard action per shard and namespace with mergeable chunks', () => {
    const actions = selectAutoMergeActions([{ namespace: 'db.coll', chunks: referenceExample() }], NOW, settings);
    expect(actions).toEqual([
      { kind: 'mergeAllChunksOnShard', namespace: 'db.coll', shard: 'Shard0' },
      { kind: 'mergeAllChunksOnShard', namespace: 'db.coll', shard: 'Shard1' },
    ]);
  });

  it('never considers a jumbo chunk mergeable', () => {
    const chunks = referenceExample().map((c, i) => (i === 1 ? { ...c, jumbo: true } : c));
    expect(findMergeableRuns(chunks, NOW, settings).map((r) => label(r.chunks, chunks))).toEqual(['C-D', 'E-F', 'G-H']);
  });

  it('keeps a chunk migrated within the snapshot history window out of merges', () => {
    const chunks = referenceExample().map((c, i) => (i === 2 ? movedAt(c, NOW - 200) : c));
    expect(findMergeableRuns(chunks, NOW, settings).map((r) => label(r.chunks, chunks))).toEqual(['A-B', 'E-F', 'G-H']);
  });

  it('requires the last migration to be older than both the snapshot window and the transaction lifetime', () => {
    const chunk = referenceExample()[0] as Chunk;
    const long = { ...settings, minSnapshotHistoryWindowInSeconds: 10, transactionLifetimeLimitSeconds: 500 };
    expect(isMergeable(movedAt(chunk, NOW - 400), NOW, long)).toBe(false);
    expect(isMergeable(movedAt(chunk, NOW - 501), NOW, long)).toBe(true);
    expect(isMergeable(movedAt(chunk, NOW - 300), NOW, settings)).toBe(false);
    expect(isMergeable(movedAt(chunk, NOW - 301), NOW, settings)).toBe(true);
  });

  it('treats a chunk that was never migrated as mergeable however young', () => {
    expect(isMergeable(referenceExample()[0] as Chunk, 1, settings)).toBe(true);
  });

  it('answers at most 10 actions at a time, counting those in flight', () => {
    const collections = Array.from({ length: 12 }, (_, i) => ({
      namespace: `db.c${String(i).padStart(2, '0')}`,
      chunks: referenceExample(),
    }));
    expect(selectAutoMergeActions(collections, NOW, settings)).toHaveLength(10);
    expect(selectAutoMergeActions(collections, NOW, settings, 7)).toHaveLength(3);
    expect(selectAutoMergeActions(collections, NOW, settings, 10)).toEqual([]);
  });

  it('skips collections with the auto-merger disabled', () => {
    expect(selectAutoMergeActions([{ namespace: 'db.coll', chunks: referenceExample(), autoMergerEnabled: false }], NOW, settings)).toEqual(
      [],
    );
  });
});

describe('capRunBySize', () => {
  const chunks = referenceExample().slice(0, 4); // A B C D
  const sizes = new Map(chunks.map((c, i) => [c, [40, 50, 30, 80][i]!]));
  const sizeOf = (c: Chunk) => sizes.get(c)!;

  it('keeps a run whose total is within the max chunk size whole', () => {
    expect(capRunBySize(chunks, sizeOf, 200).map((p) => label(p, chunks))).toEqual(['A-B-C-D']);
  });

  it('cuts a run so that no merged chunk exceeds the max chunk size, and drops single chunks', () => {
    // A+B+C = 120 fits in 130, D alone is left out.
    expect(capRunBySize(chunks, sizeOf, 130).map((p) => label(p, chunks))).toEqual(['A-B-C']);
    // A+B = 90, C+D = 110.
    expect(capRunBySize(chunks, sizeOf, 110).map((p) => label(p, chunks))).toEqual(['A-B', 'C-D']);
    expect(capRunBySize(chunks, sizeOf, 60)).toEqual([]);
  });
});
