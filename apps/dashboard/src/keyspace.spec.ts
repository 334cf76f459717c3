import { describe, expect, it } from 'vitest';
import { applyPlacement, chunkAtColumn, chunkView, columnSpan, layoutBand, zoneSpan } from './keyspace';

const MIN = [{ $minKey: 1 }];
const MAX = [{ $maxKey: 1 }];
const k = (n: number) => [n];
const chunk = (min: unknown, max: unknown, shard: string, version: string) => ({ min, max, shard, version });
const ranges = (chunks: ReturnType<typeof chunkView>[]) => chunks.map((c) => `${c.minKey}-${c.maxKey}@${c.shard}:${c.version}`);

describe('the key-space band', () => {
  it('replaces a split chunk by its pieces in key order', () => {
    const chunks = [chunkView(chunk(MIN, k(10), 'a', '1|0')), chunkView(chunk(k(10), MAX, 'a', '1|1'))];
    const ok = applyPlacement(chunks, [chunk(MIN, k(10), 'a', '1|0')], [chunk(MIN, k(5), 'a', '1|2'), chunk(k(5), k(10), 'a', '1|3')], 7);
    expect(ok).toBe(true);
    expect(ranges(chunks)).toEqual(['[{"$minKey":1}]-[5]@a:1|2', '[5]-[10]@a:1|3', '[10]-[{"$maxKey":1}]@a:1|1']);
    expect(chunks[1]!.changedAt).toBe(7);
  });

  it('replaces a merged run by one chunk and moves a chunk with its donor control chunk', () => {
    const chunks = [chunk(MIN, k(5), 'a', '1|2'), chunk(k(5), k(10), 'a', '1|3'), chunk(k(10), MAX, 'a', '1|1')].map((c) => chunkView(c));
    expect(applyPlacement(chunks, [chunk(MIN, k(5), 'a', '1|2'), chunk(k(5), k(10), 'a', '1|3')], [chunk(MIN, k(10), 'a', '1|4')], 1)).toBe(
      true,
    );
    expect(ranges(chunks)).toEqual(['[{"$minKey":1}]-[10]@a:1|4', '[10]-[{"$maxKey":1}]@a:1|1']);
    const moved = applyPlacement(
      chunks,
      [chunk(k(10), MAX, 'a', '1|1'), chunk(MIN, k(10), 'a', '1|4')],
      [chunk(k(10), MAX, 'b', '2|0'), chunk(MIN, k(10), 'a', '2|1')],
      2,
    );
    expect(moved).toBe(true);
    expect(ranges(chunks)).toEqual(['[{"$minKey":1}]-[10]@a:2|1', '[10]-[{"$maxKey":1}]@b:2|0']);
  });

  it('refuses, changing nothing, a change whose before is not what the page holds', () => {
    const chunks = [chunkView(chunk(MIN, MAX, 'a', '1|0'))];
    expect(applyPlacement(chunks, [chunk(MIN, MAX, 'a', '1|7')], [chunk(MIN, k(1), 'a', '1|8'), chunk(k(1), MAX, 'a', '1|9')], 1)).toBe(
      false,
    );
    expect(applyPlacement(chunks, [chunk(k(3), MAX, 'a', '1|0')], [], 1)).toBe(false);
    expect(ranges(chunks)).toEqual(['[{"$minKey":1}]-[{"$maxKey":1}]@a:1|0']);
  });

  it('takes a change it already holds (read after the change committed) as applied', () => {
    const chunks = [chunkView(chunk(MIN, k(5), 'a', '1|2')), chunkView(chunk(k(5), MAX, 'a', '1|3'))];
    expect(applyPlacement(chunks, [chunk(MIN, MAX, 'a', '1|1')], [chunk(MIN, k(5), 'a', '1|2'), chunk(k(5), MAX, 'a', '1|3')], 9)).toBe(
      true,
    );
    expect(chunks.map((c) => c.changedAt)).toEqual([0, 0]);
  });

  it('counts every chunk in exactly one column when chunks outnumber pixels, else one chunk per column', () => {
    const chunks = Array.from({ length: 100_000 }, (_, i) => chunkView(chunk(k(i), k(i + 1), i === 54_321 ? 'b' : 'a', '1|0')));
    for (const width of [1, 7, 1280, 200_000]) {
      const layout = layoutBand(chunks, width, ['a', 'b']);
      let total = 0;
      for (const n of layout.counts) total += n;
      expect(total).toBe(width <= chunks.length ? chunks.length : width);
      expect(layout.counts.filter((_, i) => i % 2 === 1).reduce((a, b) => a + b, 0)).toBe(
        width <= chunks.length ? 1 : width / chunks.length,
      );
    }
    expect(columnSpan(0, 3, 10)).toEqual([0, 1]);
    expect(chunkAtColumn(9, 3, 10)).toBe(2);
    expect(chunkAtColumn(10, 3, 10)).toBe(-1);
  });

  it('places a zone from the chunk at its min to the chunk ending at its max', () => {
    const chunks = [chunk(MIN, k(5), 'a', '1|0'), chunk(k(5), k(8), 'a', '1|1'), chunk(k(8), MAX, 'b', '1|2')].map((c) => chunkView(c));
    expect(zoneSpan(chunks, k(5), MAX)).toEqual([1, 3]);
    expect(zoneSpan(chunks, k(6), MAX)).toBeNull();
  });
});
