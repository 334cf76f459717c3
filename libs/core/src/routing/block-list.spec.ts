import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BlockList } from './block-list.js';
import type { BlockEdit } from './block-list.js';
import { probeFromString } from './key-probe.js';

/** Keys "k0000", "k0002", ... as binary strings; items are the numbers. */
function buildList(count: number, blockSize: number): BlockList<number> {
  const keys = Array.from({ length: count }, (_, i) => key(2 * i));
  return BlockList.fromSorted(
    keys,
    keys.map((_, i) => 2 * i),
    blockSize,
  );
}

const key = (n: number) => `k${String(n).padStart(6, '0')}`;

describe('BlockList', () => {
  it('finds the floor of a key and exact keys', () => {
    const list = buildList(100, 8);
    expect(list.floorItem(probeFromString(key(51)))).toBe(50);
    expect(list.floorItem(probeFromString(key(50)))).toBe(50);
    expect(list.floorItem(probeFromString('a'))).toBeUndefined();
    expect(list.exactPosition(probeFromString(key(50)))).toBe(25);
    expect(list.exactPosition(probeFromString(key(51)))).toBe(-1);
  });

  it('applies random edits exactly like splicing a plain array', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 80 }),
        fc.integer({ min: 2, max: 9 }),
        fc.array(fc.tuple(fc.nat(), fc.nat({ max: 5 }), fc.nat({ max: 4 })), { maxLength: 6 }),
        (count, blockSize, rawEdits) => {
          const list = buildList(count, blockSize);
          const model = [...list.items()];
          // Edits replace [start, end) with `inserted` odd numbers between neighbours, keeping order.
          const edits: BlockEdit<number>[] = [];
          let floor = 0;
          for (const [start, length, inserted] of rawEdits
            .map(([s, l, n]) => [s % (count + 1), l, n] as const)
            .sort((a, b) => a[0] - b[0])) {
            const from = Math.max(start, floor);
            const to = Math.min(count, from + length);
            if (from >= count || (to === from && inserted === 0)) continue;
            const low = from === 0 ? -1 : (model[from - 1] as number);
            const items = Array.from({ length: Math.min(inserted, 1) }, () => low + 1).filter(
              (v) => to >= count || v < (model[to] as number),
            );
            edits.push({ start: from, end: to, keys: items.map(key), items });
            floor = to + 1;
          }
          const next = list.replace(edits);
          const expected = [...model];
          for (const edit of [...edits].reverse()) expected.splice(edit.start, edit.end - edit.start, ...edit.items);
          expect([...next.items()]).toEqual(expected);
          expect(next.size).toBe(expected.length);
          for (let p = 0; p < expected.length; p++) expect(next.keyAt(p)).toBe(key(expected[p] as number));
          expect([...list.items()]).toEqual(model); // the old list is unchanged
        },
      ),
      { numRuns: 500 },
    );
  });

  it('shares every untouched block with the list it came from', () => {
    const list = buildList(10_000, 100);
    const next = list.replace([{ start: 5000, end: 5001, keys: [key(10_000)], items: [10_000] }]);
    const blocksOf = (l: BlockList<number>) => (l as unknown as { blocks: readonly object[] }).blocks;
    const before = new Set(blocksOf(list));
    const shared = blocksOf(next).filter((b) => before.has(b)).length;
    expect(blocksOf(next)).toHaveLength(100);
    expect(shared).toBe(99);
  });
});
