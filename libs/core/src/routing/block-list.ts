/**
 * A persistent sorted list stored as an array of blocks (a two-level B-tree). Keys are binary
 * strings (encoded shard keys, one char per byte); lookups take a `KeyProbe` (key-probe.ts).
 *
 * Immutable: `replace` returns a new list that shares every untouched block with the old one,
 * so an edit costs O(B · touched blocks + N / B) rather than O(N). With B = 512 and a million
 * entries the top level is ~2,000 references. Lookups are two binary searches: O(log N).
 */
import type { KeyProbe, SearchableKeys } from './key-probe.js';
import { compareKeyToProbe, lastAtOrBelow, searchableKeys } from './key-probe.js';

/** One block: parallel arrays of keys (ascending) and items, with the keys' prefix numbers. */
interface Block<T> {
  readonly search: SearchableKeys;
  readonly items: readonly T[];
}

function makeBlock<T>(keys: string[], items: T[]): Block<T> {
  return { search: searchableKeys(keys), items };
}

/** Replace entries at global positions `[start, end)` with the given sorted entries. */
export interface BlockEdit<T> {
  readonly start: number;
  readonly end: number;
  readonly keys: readonly string[];
  readonly items: readonly T[];
}

/** The default number of entries per block. */
export const DEFAULT_BLOCK_SIZE = 512;

/** A sorted, immutable list of (key, item) entries in blocks. Internal to the routing table. */
export class BlockList<T> {
  /**
   * The blocks' search arrays and item arrays, copied out of the blocks so a lookup goes from
   * this list straight to them: one pointer hop (a likely cache miss) fewer per lookup.
   */
  private readonly blockSearch: readonly SearchableKeys[];
  private readonly blockItems: readonly (readonly T[])[];

  private constructor(
    private readonly blocks: readonly Block<T>[],
    private readonly firstKeys: SearchableKeys,
    private readonly starts: readonly number[],
    readonly size: number,
    readonly blockSize: number,
  ) {
    this.blockSearch = blocks.map((b) => b.search);
    this.blockItems = blocks.map((b) => b.items);
  }

  /** Builds a list from entries already sorted by key. O(N). Throws nothing (the caller sorts). */
  static fromSorted<T>(keys: readonly string[], items: readonly T[], blockSize = DEFAULT_BLOCK_SIZE): BlockList<T> {
    const blocks: Block<T>[] = [];
    for (let i = 0; i < keys.length; i += blockSize) {
      blocks.push(makeBlock(keys.slice(i, i + blockSize), items.slice(i, i + blockSize)));
    }
    return BlockList.fromBlocks(blocks, blockSize);
  }

  private static fromBlocks<T>(blocks: Block<T>[], blockSize: number): BlockList<T> {
    const first: string[] = new Array<string>(blocks.length);
    const hi = new Float64Array(blocks.length);
    const lo = new Float64Array(blocks.length);
    const starts: number[] = new Array<number>(blocks.length);
    let size = 0;
    for (let b = 0; b < blocks.length; b++) {
      const search = (blocks[b] as Block<T>).search;
      first[b] = search.keys[0] as string;
      hi[b] = search.hi[0] as number;
      lo[b] = search.lo[0] as number;
      starts[b] = size;
      size += search.keys.length;
    }
    return new BlockList(blocks, { keys: first, hi, lo }, starts, size, blockSize);
  }

  /** Returns the global position of the last entry whose key is <= the probe, or -1. O(log N). Throws nothing. */
  floorPosition(probe: KeyProbe): number {
    const b = lastAtOrBelow(this.firstKeys, probe);
    if (b < 0) return -1;
    return (this.starts[b] as number) + lastAtOrBelow(this.blockSearch[b] as SearchableKeys, probe);
  }

  /** Returns the item of the last entry whose key is <= the probe, or undefined. O(log N). Throws nothing. */
  floorItem(probe: KeyProbe): T | undefined {
    const b = lastAtOrBelow(this.firstKeys, probe);
    if (b < 0) return undefined;
    return (this.blockItems[b] as readonly T[])[lastAtOrBelow(this.blockSearch[b] as SearchableKeys, probe)];
  }

  /** Returns the global position of the entry whose key equals the probe, or -1. O(log N). Throws nothing. */
  exactPosition(probe: KeyProbe): number {
    const p = this.floorPosition(probe);
    return p >= 0 && compareKeyToProbe(this.keyAt(p), probe) === 0 ? p : -1;
  }

  /** Returns the key at a global position. Throws `RangeError` when out of range. */
  keyAt(position: number): string {
    const [b, i] = this.locate(position);
    return (this.blocks[b] as Block<T>).search.keys[i] as string;
  }

  /** Returns the item at a global position. Throws `RangeError` when out of range. */
  itemAt(position: number): T {
    const [b, i] = this.locate(position);
    return (this.blocks[b] as Block<T>).items[i] as T;
  }

  /** Iterates items from global position `from` (inclusive) to `to` (exclusive). Throws nothing. */
  *items(from = 0, to = this.size): Generator<T> {
    if (from >= to) return;
    let [b, i] = this.locate(from);
    for (let p = from; p < to; p++) {
      const block = this.blocks[b] as Block<T>;
      yield block.items[i] as T;
      if (++i === block.items.length) [b, i] = [b + 1, 0];
    }
  }

  /** Iterates items with their keys from global position `from`. Throws nothing. */
  *entries(from = 0): Generator<[string, T]> {
    if (from >= this.size) return;
    let [b, i] = this.locate(from);
    for (; b < this.blocks.length; b++, i = 0) {
      const block = this.blocks[b] as Block<T>;
      for (; i < block.search.keys.length; i++) yield [block.search.keys[i] as string, block.items[i] as T];
    }
  }

  /**
   * Returns a new list with the edits applied. Edits must be sorted, non-overlapping and keep
   * the list sorted (the caller checks). Only blocks an edit touches are rebuilt; a rebuilt
   * run of blocks is re-cut into blocks of about `blockSize`, absorbing a neighbour when it
   * would be less than half full, so blocks stay between B/2 and 2B over time.
   * Throws nothing.
   */
  replace(edits: readonly BlockEdit<T>[]): BlockList<T> {
    const out: Block<T>[] = [];
    const nBlocks = this.blocks.length;
    let nextBlock = 0;
    let e = 0;
    while (e < edits.length) {
      const startBlock = this.blockOf((edits[e] as BlockEdit<T>).start);
      for (; nextBlock < startBlock; nextBlock++) out.push(this.blocks[nextBlock] as Block<T>);
      let endBlock = this.blockOf(Math.max((edits[e] as BlockEdit<T>).end - 1, (edits[e] as BlockEdit<T>).start));
      let last = e + 1;
      while (last < edits.length && this.blockOf((edits[last] as BlockEdit<T>).start) <= endBlock) {
        const edit = edits[last] as BlockEdit<T>;
        endBlock = Math.max(endBlock, this.blockOf(Math.max(edit.end - 1, edit.start)));
        last++;
      }
      const keys: string[] = [];
      const items: T[] = [];
      let cursor = this.starts[startBlock] as number;
      for (; e < last; e++) {
        const edit = edits[e] as BlockEdit<T>;
        this.copyRange(cursor, edit.start, keys, items);
        for (let k = 0; k < edit.keys.length; k++) {
          keys.push(edit.keys[k] as string);
          items.push(edit.items[k] as T);
        }
        cursor = edit.end;
      }
      let endPosition = (this.starts[endBlock] as number) + (this.blocks[endBlock] as Block<T>).search.keys.length;
      const nextEditStart = e < edits.length ? this.blockOf((edits[e] as BlockEdit<T>).start) : nBlocks;
      if (keys.length + (endPosition - cursor) < this.blockSize / 2 && endBlock + 1 < nextEditStart) {
        endBlock++;
        endPosition += (this.blocks[endBlock] as Block<T>).search.keys.length;
      }
      this.copyRange(cursor, endPosition, keys, items);
      cutIntoBlocks(keys, items, this.blockSize, out);
      nextBlock = endBlock + 1;
    }
    for (; nextBlock < nBlocks; nextBlock++) out.push(this.blocks[nextBlock] as Block<T>);
    return BlockList.fromBlocks(out, this.blockSize);
  }

  private copyRange(from: number, to: number, keys: string[], items: T[]): void {
    if (from >= to) return;
    let [b, i] = this.locate(from);
    let remaining = to - from;
    while (remaining > 0) {
      const block = this.blocks[b] as Block<T>;
      const take = Math.min(remaining, block.search.keys.length - i);
      for (let k = i; k < i + take; k++) {
        keys.push(block.search.keys[k] as string);
        items.push(block.items[k] as T);
      }
      remaining -= take;
      b++;
      i = 0;
    }
  }

  private blockOf(position: number): number {
    if (position >= this.size) return this.blocks.length - 1;
    return lastAtOrBelowNumber(this.starts, position);
  }

  private locate(position: number): [number, number] {
    if (position < 0 || position >= this.size) throw new RangeError(`Position ${position} is outside 0..${this.size - 1}.`);
    const b = lastAtOrBelowNumber(this.starts, position);
    return [b, position - (this.starts[b] as number)];
  }
}

function cutIntoBlocks<T>(keys: string[], items: T[], blockSize: number, out: Block<T>[]): void {
  if (keys.length === 0) return;
  const count = Math.max(1, Math.round(keys.length / blockSize));
  const per = Math.ceil(keys.length / count);
  for (let i = 0; i < keys.length; i += per) out.push(makeBlock(keys.slice(i, i + per), items.slice(i, i + per)));
}

function lastAtOrBelowNumber(sorted: readonly number[], key: number): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((sorted[mid] as number) <= key) lo = mid + 1;
    else hi = mid;
  }
  return lo - 1;
}
