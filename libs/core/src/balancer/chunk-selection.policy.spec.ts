import { describe, expect, it } from 'vitest';
import type { ChunkSelectionSettings } from './balancer-settings.js';
import { DEFAULT_CHUNK_SELECTION_SETTINGS } from './balancer-settings.js';
import type { ChunkRun } from './chunk-layout.js';
import { layoutChunks, layoutKey } from './chunk-layout.js';
import { migrationThreshold, optimalChunkCount, selectMigrations, selectZoneBoundarySplits } from './chunk-selection.policy.js';
import { selectTopChunkMigration } from './top-chunk.policy.js';
import type { CollectionDistribution, ShardStatistics, ZoneRange } from './distribution.js';
import { MigrationSlots } from './migration-slots.js';

const MB = 1024 * 1024;
const MAX = 128 * MB;
const NS = 'db.coll';

const active = (id: string, zones: string[] = []): ShardStatistics => ({ id, state: 'active', zones });
const draining = (id: string): ShardStatistics => ({ id, state: 'draining', zones: [] });
const zone = (zoneName: string, from: number, to: number): ZoneRange => ({
  range: { min: layoutKey(from), max: layoutKey(to) },
  zone: zoneName,
});

/** `{ A: 3, B: 0 }` → 3 chunks of `size` on A. */
function collection(runs: ChunkRun[], extra: Partial<CollectionDistribution> = {}): CollectionDistribution {
  return { namespace: NS, chunks: layoutChunks(runs), zones: [], maxChunkSizeBytes: MAX, ...extra };
}
const run = (shard: string, chunks: number, sizeBytes = MAX / 2, jumbo = false): ChunkRun => ({ shard, chunks, sizeBytes, jumbo });
const moves = (r: ReturnType<typeof selectMigrations>) => r.migrations.map((m) => `${m.from}->${m.to}:${m.reason}`);
const dataSize = DEFAULT_CHUNK_SELECTION_SETTINGS;
const optimal: ChunkSelectionSettings = { ...dataSize, mode: 'chunkCountOptimal' };
const threshold: ChunkSelectionSettings = { ...dataSize, mode: 'chunkCountThreshold' };
/** MongoDB's slots with `shard` donating one migration already. */
const underWay = (from: string, to: string, at = 1000) => ({
  namespace: 'db.other',
  range: { min: layoutKey(at), max: layoutKey(at + 1) },
  from,
  to,
});
const inAMigration = (shard: string): MigrationSlots => new MigrationSlots(1, [underWay(shard, 'elsewhere')]);
const ranges = (r: ReturnType<typeof selectMigrations>) => r.migrations.map((m) => JSON.stringify(m.range));

describe('selectMigrations on data size', () => {
  it('moves nothing when the most and least loaded shards differ by at most 3 max chunk sizes', () => {
    // 6 chunks of half the max: 3 × max on A, nothing on B: a difference of exactly 3 × max.
    const result = selectMigrations([active('A'), active('B')], [collection([run('A', 6)])], dataSize);
    expect(result.migrations).toEqual([]);
    expect(result.collections[0]).toMatchObject({ balancerCompliant: true, jumboChunksSkipped: 0 });
  });

  it('moves a chunk from the most to the least loaded shard when they differ by more than 3 max chunk sizes', () => {
    const result = selectMigrations([active('A'), active('B'), active('C')], [collection([run('A', 7), run('B', 2)])], dataSize);
    expect(moves(result)).toEqual(['A->C:imbalance']);
    expect(result.migrations[0]?.range.max).toEqual(layoutKey(1));
    expect(result.collections[0]).toMatchObject({ balancerCompliant: false, firstComplianceViolation: 'chunksImbalance' });
  });

  it('never moves a chunk at least as large as the difference, which would only swap the two shards', () => {
    // A holds one 400 MiB chunk (not jumbo), B nothing: moving it would make B the loaded one.
    const result = selectMigrations([active('A'), active('B')], [collection([run('A', 1, 400 * MB)])], dataSize);
    expect(result.migrations).toEqual([]);
    expect(result.collections[0]?.firstComplianceViolation).toBe('chunksImbalance');
  });

  it('skips a chunk too large for the difference and moves a smaller one', () => {
    // A holds 610 MiB, B 100 MiB: the difference, 510 MiB, is above 3 × 128 MiB but below the 600 MiB chunk.
    const coll = collection([run('A', 1, 600 * MB), run('A', 1, 10 * MB), run('B', 1, 100 * MB)]);
    const result = selectMigrations([active('A'), active('B')], [coll], dataSize);
    expect(result.migrations.map((m) => m.estimatedSizeBytes)).toEqual([10 * MB]);
  });

  it('measures data per zone when the collection has zones', () => {
    // B is in EU and holds 10 EU chunks; outside EU, A holds 7 and C none: C receives one.
    const shards = [active('A'), active('B', ['EU']), active('C')];
    const coll = collection([run('A', 7), run('B', 10)], { zones: [zone('EU', 7, 17)] });
    expect(moves(selectMigrations(shards, [coll], dataSize))).toEqual(['A->C:imbalance']);
  });

  it("weighs chunks with no size by their shard's reported bytes, so a zone of unsized chunks is balanced", () => {
    // Chunks are sized only by defragmentation: the shards report their bytes, the chunks have none.
    const unsized = (shard: string, chunks: number): ChunkRun => ({ shard, chunks });
    const coll = collection([unsized('A', 10)], { zones: [zone('EU', 0, 10)], shardDataSizeBytes: { A: 10 * MAX, B: 0 } });
    const result = selectMigrations([active('A', ['EU']), active('B', ['EU'])], [coll], dataSize);
    expect(moves(result)).toEqual(['A->B:imbalance']);
    expect(result.migrations[0]?.estimatedSizeBytes).toBe(MAX);
  });

  it('sends a drained chunk to the emptiest shard of those equally loaded in its zone', () => {
    // Outside the zone B and C hold nothing; B holds EU data, C nothing at all.
    const shards = [active('A'), active('B', ['EU']), active('C'), draining('D')];
    const coll = collection([run('A', 10), run('B', 4), run('D', 2)], { zones: [zone('EU', 10, 14)] });
    expect(moves(selectMigrations(shards, [coll], dataSize))).toEqual(['D->C:drain', 'A->B:imbalance']);
  });

  it('puts each shard in at most one migration per round', () => {
    const shards = [active('A'), active('B'), active('C'), active('D'), active('E')];
    const result = selectMigrations(shards, [collection([run('A', 20), run('B', 20)])], dataSize);
    expect(moves(result)).toEqual(['A->C:imbalance', 'B->D:imbalance']);
  });

  it('leaves out the shards the caller says are busy', () => {
    const result = selectMigrations([active('A'), active('B'), active('C')], [collection([run('A', 20)])], dataSize, inAMigration('B'));
    expect(moves(result)).toEqual(['A->C:imbalance']);
  });

  it('lets a donor serve as many migrations as it may, each of its own chunk to its own recipient', () => {
    const shards = [active('A'), active('B'), active('C'), active('D')];
    const coll = collection([run('A', 20)]);
    for (const [max, expected] of [
      [1, ['A->B:imbalance']],
      [2, ['A->B:imbalance', 'A->C:imbalance']],
      [Infinity, ['A->B:imbalance', 'A->C:imbalance', 'A->D:imbalance']],
    ] as const) {
      const result = selectMigrations(shards, [coll], { ...dataSize, maxDonationsPerShard: max });
      expect(moves(result)).toEqual(expected);
      expect(new Set(ranges(result)).size).toBe(expected.length);
    }
  });

  it('drains one shard into three at once when a donor may serve three', () => {
    const shards = [active('A'), active('B'), active('C'), draining('D')];
    const coll = collection([run('A', 2), run('B', 2), run('C', 2), run('D', 6)]);
    const result = selectMigrations(shards, [coll], { ...dataSize, maxDonationsPerShard: 3 });
    expect(moves(result)).toEqual(['D->A:drain', 'D->B:drain', 'D->C:drain']);
    expect(new Set(ranges(result)).size).toBe(3);
  });

  it('never chooses the chunk of a migration under way, and counts its load on its recipient', () => {
    const shards = [active('A'), active('B'), active('C'), active('D')];
    const coll = collection([run('A', 20)]);
    const moving = { namespace: NS, range: coll.chunks[0]!.range, from: 'A', to: 'B' };
    const result = selectMigrations(
      shards,
      [coll],
      { ...dataSize, maxDonationsPerShard: Infinity },
      new MigrationSlots(Infinity, [moving]),
    );
    expect(moves(result)).toEqual(['A->C:imbalance', 'A->D:imbalance']);
    expect(ranges(result)).not.toContain(JSON.stringify(moving.range));
    // A holds 7 chunks of half the max, one of them moving to B; C holds none. Counted on B, A and C
    // differ by 3 max chunk sizes, no imbalance; counted on A, by 3.5, and a chunk would go to C.
    // The collection is not compliant until the migration lands, for the rule it mends.
    const small = collection([run('A', 7)]);
    const inFlight = new MigrationSlots(Infinity, [
      { namespace: NS, range: small.chunks[0]!.range, from: 'A', to: 'B', reason: 'drain' as const },
    ]);
    const judged = selectMigrations([active('A'), active('B'), active('C')], [small], dataSize, inFlight);
    expect(judged.migrations).toEqual([]);
    expect(judged.collections[0]).toMatchObject({ balancerCompliant: false, firstComplianceViolation: 'draining' });
  });

  it('never makes a donor a recipient, nor a recipient a donor', () => {
    const shards = [active('A'), active('B'), active('C')];
    // A donates to B already; C holds far more than A, and B nothing.
    const coll = collection([run('A', 6), run('C', 20)]);
    const slots = new MigrationSlots(Infinity, [underWay('A', 'B')]);
    expect(moves(selectMigrations(shards, [coll], dataSize, slots))).toEqual([]);
    expect(slots.canDonate('A')).toBe(true);
    expect(slots.canReceive('A')).toBe(false);
    expect(slots.canDonate('B')).toBe(false);
  });

  it('never selects a jumbo chunk and counts the ones it skipped', () => {
    const result = selectMigrations([active('A'), active('B')], [collection([run('A', 2, MAX * 3, true), run('A', 4)])], dataSize);
    expect(result.migrations).toHaveLength(1);
    expect(result.migrations[0]?.range.min).toEqual(layoutKey(2));
    expect(result.collections[0]?.jumboChunksSkipped).toBe(2);
  });

  it('moves nothing when every chunk of the loaded shard is jumbo', () => {
    const result = selectMigrations([active('A'), active('B')], [collection([run('A', 5, MAX * 3, true)])], dataSize);
    expect(result.migrations).toEqual([]);
    expect(result.collections[0]).toMatchObject({
      balancerCompliant: false,
      firstComplianceViolation: 'chunksImbalance',
      jumboChunksSkipped: 5,
    });
  });

  it('prefers the shard data sizes the shards reported over chunk estimates', () => {
    const coll = collection([run('A', 2), run('B', 2)], { shardDataSizeBytes: { A: 10 * MAX, B: 0 } });
    expect(moves(selectMigrations([active('A'), active('B')], [coll], dataSize))).toEqual(['A->B:imbalance']);
  });

  it('leaves a collection with balancing disabled alone but still reports it', () => {
    const coll = collection([run('A', 20)], { balancingEnabled: false });
    const result = selectMigrations([active('A'), active('B')], [coll], dataSize);
    expect(result.migrations).toEqual([]);
    expect(result.collections[0]?.firstComplianceViolation).toBe('chunksImbalance');
  });
});

describe('selectMigrations priorities', () => {
  it('drains a draining shard before anything else, to the least loaded shard', () => {
    const shards = [active('A'), active('B'), draining('C')];
    const result = selectMigrations(shards, [collection([run('A', 10), run('B', 1), run('C', 1)])], dataSize);
    expect(moves(result)).toEqual(['C->B:drain']);
    expect(result.collections[0]?.firstComplianceViolation).toBe('draining');
  });

  it('reports a draining shard as the first violation even when it is busy this round', () => {
    const result = selectMigrations([active('A'), draining('B')], [collection([run('B', 2)])], dataSize, inAMigration('B'));
    expect(result.migrations).toEqual([]);
    expect(result.collections[0]).toMatchObject({ balancerCompliant: false, firstComplianceViolation: 'draining' });
  });

  it('leaves a chunk on a draining shard when no shard of its zone can take it', () => {
    const shards = [active('A'), draining('B')];
    const coll = collection([run('A', 1), run('B', 1), run('A', 1)], { zones: [zone('EU', 1, 2)] });
    expect(selectMigrations(shards, [coll], dataSize).migrations).toEqual([]);
  });

  it('never sends a chunk to a draining shard', () => {
    const result = selectMigrations([active('A'), draining('B')], [collection([run('A', 20)])], dataSize);
    expect(result.migrations).toEqual([]);
  });

  it('drains a chunk of a zone only to a shard of that zone', () => {
    const shards = [active('A'), active('B', ['EU']), draining('C')];
    const coll = collection([run('A', 1), run('C', 1)], { zones: [zone('EU', 1, 2)] });
    expect(moves(selectMigrations(shards, [coll], dataSize))).toEqual(['C->B:drain']);
  });

  it('moves chunks violating a zone before balancing data', () => {
    const shards = [active('A'), active('B', ['EU']), active('C')];
    const coll = collection([run('A', 10)], { zones: [zone('EU', 5, 10)] });
    const result = selectMigrations(shards, [coll], dataSize);
    expect(moves(result)).toEqual(['A->B:zoneViolation']);
    expect(result.migrations[0]?.range.min).toEqual(layoutKey(5));
    expect(result.collections[0]?.firstComplianceViolation).toBe('zoneViolation');
  });

  it('balances the chunks of a zone only among the shards of that zone', () => {
    const shards = [active('A', ['EU']), active('B', ['EU']), active('C')];
    const coll = collection([run('C', 1), run('A', 19), run('C', 1)], { zones: [zone('EU', 1, 20)] });
    const result = selectMigrations(shards, [coll], dataSize);
    expect(moves(result)).toEqual(['A->B:imbalance']);
    expect(result.migrations[0]?.range.min).toEqual(layoutKey(1));
  });

  it('lets chunks outside every zone go to any shard', () => {
    const shards = [active('A', ['EU']), active('B', ['EU']), active('C')];
    const coll = collection([run('A', 20)], { zones: [zone('EU', 30, 40)] });
    expect(moves(selectMigrations(shards, [coll], dataSize))).toEqual(['A->B:imbalance']);
  });

  it('reports a balanced collection as compliant', () => {
    const result = selectMigrations([active('A'), active('B')], [collection([run('A', 3), run('B', 3)])], dataSize);
    expect(result.collections[0]).toEqual({
      namespace: NS,
      balancerCompliant: true,
      jumboChunksSkipped: 0,
      chunkCountBalancingInProgress: false,
    });
  });

  it('shares the shards of a round between collections', () => {
    const result = selectMigrations(
      [active('A'), active('B')],
      [collection([run('A', 20)]), { ...collection([run('A', 20)]), namespace: 'db.other' }],
      dataSize,
    );
    expect(result.migrations.map((m) => m.namespace)).toEqual([NS]);
  });
});

describe('the legacy chunk-count policies', () => {
  const tenShardsAndANewOne = () => {
    const names = Array.from({ length: 11 }, (_, i) => `shard${String(i).padStart(2, '0')}`);
    const coll = collection(names.slice(0, 10).map((n) => run(n, 20)));
    return { shards: names.map((n) => active(n)), coll };
  };

  it('computes the optimal number of chunks per shard rounded up: 200 chunks on 11 shards is 19', () => {
    expect(optimalChunkCount(200, 11)).toBe(19);
    expect(optimalChunkCount(200, 10)).toBe(20);
  });

  it('does not migrate when a new shard joins 10 shards of 20 chunks each (balancer-manual.rst)', () => {
    const { shards, coll } = tenShardsAndANewOne();
    const result = selectMigrations(shards, [coll], optimal);
    expect(result.migrations).toEqual([]);
    expect(result.collections[0]?.balancerCompliant).toBe(true);
  });

  it('migrates when the most loaded shard exceeds the optimal count by more than 1', () => {
    const result = selectMigrations(
      [active('A'), active('B'), active('C')],
      [collection([run('A', 5), run('B', 2), run('C', 2)])],
      optimal,
    );
    // optimal = ceil(9 / 3) = 3; A holds 5.
    expect(moves(result)).toEqual(['A->B:imbalance']);
  });

  it.each([
    [1, 2],
    [19, 2],
    [20, 4],
    [79, 4],
    [80, 8],
    [200, 8],
  ])('has a migration threshold for %i chunks of %i', (chunks, expected) => {
    expect(migrationThreshold(chunks)).toBe(expected);
  });

  it('starts balancing by the threshold table, so the new shard of the same example receives a chunk', () => {
    const { shards, coll } = tenShardsAndANewOne();
    const result = selectMigrations(shards, [coll], threshold);
    expect(moves(result)).toEqual(['shard00->shard10:imbalance']);
    expect(result.collections[0]?.chunkCountBalancingInProgress).toBe(true);
  });

  it('does not start below the threshold: 3 chunks of difference among 20 chunks stays put', () => {
    const result = selectMigrations([active('A'), active('B')], [collection([run('A', 12), run('B', 9)])], threshold);
    expect(result.migrations).toEqual([]);
  });

  it('once started, goes on until no two shards differ by 2 or more', () => {
    const coll = collection([run('A', 12), run('B', 9)], { chunkCountBalancingInProgress: true });
    const result = selectMigrations([active('A'), active('B')], [coll], threshold);
    expect(moves(result)).toEqual(['A->B:imbalance']);
    // After the move A has 11 and B 10: done.
    expect(result.collections[0]?.chunkCountBalancingInProgress).toBe(false);
  });

  it('counts chunks per zone', () => {
    const shards = [active('A', ['EU']), active('B', ['EU']), active('C')];
    // Outside the zone A, B and C hold one chunk each; the 6 EU chunks are all on A (optimal 3).
    const coll = collection([run('A', 7), run('B', 1), run('C', 1)], { zones: [zone('EU', 1, 7)] });
    expect(moves(selectMigrations(shards, [coll], optimal))).toEqual(['A->B:imbalance']);
  });
});

describe('selectZoneBoundarySplits', () => {
  it('splits a chunk that straddles zone boundaries at each boundary inside it', () => {
    const coll = collection([run('A', 1), run('A', 1)], {
      zones: [zone('EU', 0.5, 0.7)],
      chunks: layoutChunks([run('A', 1), run('B', 1)]),
    });
    // Chunk 0 is [MinKey, 10), the zone [5, 7).
    const splits = selectZoneBoundarySplits(coll);
    expect(splits).toEqual([{ namespace: NS, shard: 'A', range: coll.chunks[0]?.range, splitPoints: [[5], [7]], reason: 'zoneBoundary' }]);
  });

  it('splits nothing when zone ranges follow chunk boundaries', () => {
    expect(selectZoneBoundarySplits(collection([run('A', 4)], { zones: [zone('EU', 1, 3)] }))).toEqual([]);
  });

  it('gives a shared boundary of two zones once', () => {
    const coll = collection([run('A', 2)], { zones: [zone('EU', 0.2, 0.5), zone('US', 0.5, 1)] });
    expect(selectZoneBoundarySplits(coll)[0]?.splitPoints).toEqual([[2], [5]]);
  });
});

describe('selectTopChunkMigration', () => {
  // A holds 3 chunks, the last of them the top chunk just split off; B and C hold 1 and 2.
  const coll = collection([run('A', 3), run('B', 1), run('C', 2), run('A', 1, 1024)]);
  const top = coll.chunks[coll.chunks.length - 1]!.range;
  const shards = [active('A'), active('B'), active('C')];

  it('moves the top chunk to the least loaded shard with reason topChunk', () => {
    const decision = selectTopChunkMigration(shards, coll, top, dataSize);
    expect(decision).toMatchObject({ move: { from: 'A', to: 'B', reason: 'topChunk', range: top } });
  });

  it('leaves the top chunk where it is when its shard is the least loaded', () => {
    const light = collection([run('A', 1, 10), run('B', 3), run('C', 3), run('A', 1, 10)]);
    const edge = light.chunks[light.chunks.length - 1]!.range;
    expect(selectTopChunkMigration(shards, light, edge, dataSize)).toEqual({ skip: 'donorIsLeastLoaded' });
  });

  it('chooses among the shards of the chunk zone only, and never a busy or draining one', () => {
    const zoned = { ...coll, zones: [{ range: top, zone: 'hot' }] };
    const inZone = [active('A', ['hot']), active('B'), active('C', ['hot'])];
    expect(selectTopChunkMigration(inZone, zoned, top, dataSize)).toMatchObject({ move: { to: 'C' } });
    expect(selectTopChunkMigration(shards, coll, top, dataSize, new Set(['B']))).toMatchObject({ move: { to: 'C' } });
    expect(selectTopChunkMigration([active('A'), draining('B'), active('C')], coll, top, dataSize)).toMatchObject({ move: { to: 'C' } });
  });

  it('does not move a jumbo chunk, a range that is not a chunk, or a chunk of a collection with balancing off', () => {
    const jumbo = collection([run('A', 3), run('B', 1), run('A', 1, MAX, true)]);
    expect(selectTopChunkMigration(shards, jumbo, jumbo.chunks[4]!.range, dataSize)).toEqual({ skip: 'jumbo' });
    expect(selectTopChunkMigration(shards, coll, { min: layoutKey(60), max: layoutKey(61) }, dataSize)).toEqual({ skip: 'notAChunk' });
    expect(selectTopChunkMigration(shards, { ...coll, balancingEnabled: false }, top, dataSize)).toEqual({ skip: 'balancingDisabled' });
  });

  it('does not move the top chunk while its shard is in another migration', () => {
    expect(selectTopChunkMigration(shards, coll, top, dataSize, new Set(['A']))).toEqual({ skip: 'donorBusy' });
  });

  it('counts chunks instead of bytes in the chunk-count modes', () => {
    // B holds one huge chunk and C two small ones: by count B is the least loaded.
    const counted = collection([run('A', 3), run('B', 1, 100 * MAX), run('C', 2, 1), run('A', 1, 1)]);
    const edge = counted.chunks[6]!.range;
    expect(selectTopChunkMigration(shards, counted, edge, optimal)).toMatchObject({ move: { to: 'B' } });
    expect(selectTopChunkMigration(shards, counted, edge, dataSize)).toMatchObject({ move: { to: 'C' } });
  });
});
