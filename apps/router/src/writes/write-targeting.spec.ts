import { Long } from 'bson';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  RoutingTable,
  type ValueObject,
  createInitialChunks,
  extractShardKey,
  fromExtendedJsonObject,
  globalMaxKey,
  globalMinKey,
  parseShardKeyPattern,
} from '@tessera/core';
import {
  type WriteRouting,
  isWriteWithoutShardKey,
  routeFilter,
  routeInsert,
  routeWrite,
  targetDocumentFilter,
  targetDocumentProjection,
} from './write-targeting.js';

/** `{x: 1}` split at 100 and 200 over shards s0, s1, s2. */
function sharded(): WriteRouting {
  return shardedOn({ x: 1 }, [[Long.fromNumber(100)], [Long.fromNumber(200)]]);
}

/** `key` split at `splitPoints` over shards s0, s1, ... */
function shardedOn(key: Record<string, 1 | 'hashed'>, splitPoints: unknown[][]): WriteRouting {
  const pattern = parseShardKeyPattern(key);
  const at = { t: 1, i: 1 };
  const chunks = createInitialChunks({
    generation: { epoch: 'a'.repeat(24), timestamp: at },
    keySpace: { min: globalMinKey(pattern), max: globalMaxKey(pattern) },
    splitPoints: splitPoints as never,
    shards: splitPoints.map((_, i) => `s${i}`).concat(`s${splitPoints.length}`),
    at,
  });
  return { kind: 'sharded', ns: 'db.c', table: RoutingTable.fromChunks(chunks), pattern };
}

const unsharded: WriteRouting = { kind: 'unsharded', ns: 'db.c', primaryShard: 'p' };

describe('write targeting', () => {
  it('sends an insert to the shard owning its key, and to the primary when unsharded', () => {
    expect([
      routeInsert({ _id: 1, x: 5 }, sharded()),
      routeInsert({ _id: 1, x: 150 }, sharded()),
      routeInsert({ _id: 1 }, unsharded),
    ]).toEqual(['s0', 's1', 'p']);
  });

  it("reads an insert's shard key from the document as it came, as the shard reads it from the decoded one", () => {
    const routings = [sharded(), shardedOn({ 'a.b': 1 }, [[150]]), shardedOn({ x: 'hashed' }, [[Long.fromNumber(0)]])];
    const wire = fc.oneof(
      fc.integer({ min: -50, max: 350 }),
      fc.integer({ min: -50, max: 350 }).map((n) => ({ $numberLong: String(n) })),
      fc.integer({ min: -50, max: 350 }).map((n) => ({ $numberInt: String(n) })),
      fc.constantFrom(null, 'text', { $oid: '0123456789abcdef01234567' }, { $date: '2020-01-01T00:00:00Z' }),
    );
    const documents = fc.record({ x: wire, a: fc.oneof(wire, fc.record({ b: wire, c: wire })), y: wire }, { requiredKeys: [] });
    fc.assert(
      fc.property(documents, (document) => {
        for (const routing of routings) {
          if (routing.kind !== 'sharded') continue;
          const decoded = fromExtendedJsonObject(document) as ValueObject;
          expect(routeInsert(document, routing)).toBe(routing.table.shardFor(extractShardKey(routing.pattern, decoded)));
        }
      }),
    );
  });

  it('refuses an insert whose shard key field holds an array', () => {
    expect(() => routeInsert({ _id: 1, x: [1, 2] }, sharded())).toThrow(expect.objectContaining({ code: 'BAD_VALUE' }));
  });

  it('sends a multi-write to the shards its key range overlaps, or to all without the key', () => {
    expect(routeWrite({ filter: { x: { $gte: 150 } }, single: false, upsert: false, operation: 'update' }, sharded())).toEqual([
      's1',
      's2',
    ]);
    expect(routeWrite({ filter: { y: 1 }, single: false, upsert: false, operation: 'delete' }, sharded())).toEqual(['s0', 's1', 's2']);
  });

  it('sends a single-document write with the shard key to its one shard', () => {
    expect(routeWrite({ filter: { x: 250, y: 1 }, single: true, upsert: true, operation: 'update' }, sharded())).toEqual(['s2']);
    expect(routeWrite({ filter: { x: 120, y: { $gt: 1 } }, single: true, upsert: false, operation: 'delete' }, sharded())).toEqual(['s1']);
  });

  it('runs a single-document write without the full shard key by equality as a write without shard key', () => {
    const single = (filter: unknown, upsert = false) => ({ filter, single: true, upsert, operation: 'update' });
    expect(isWriteWithoutShardKey(single({ y: 1 }), sharded())).toBe(true);
    // A range on one shard today could span two after a split: decided by the filter alone.
    expect(isWriteWithoutShardKey(single({ x: { $gte: 120, $lt: 130 } }), sharded())).toBe(true);
    expect(isWriteWithoutShardKey(single({ x: 120 }), sharded())).toBe(false);
    expect(isWriteWithoutShardKey(single({ y: 1 }, true), sharded())).toBe(false);
    expect(isWriteWithoutShardKey({ ...single({ y: 1 }), single: false }, sharded())).toBe(false);
    expect(isWriteWithoutShardKey(single({ y: 1 }), unsharded)).toBe(false);
  });

  it('narrows the write phase to the document read, by _id and full shard key, keeping the filter', () => {
    const pattern = parseShardKeyPattern({ 'a.b': 1, c: 1 });
    expect(targetDocumentProjection(pattern)).toEqual({ _id: 1, 'a.b': 1, c: 1 });
    expect(targetDocumentFilter(pattern, { _id: 7, a: { b: 2 } }, { y: { $gt: 1 } })).toEqual({
      _id: 7,
      'a.b': 2,
      c: null,
      $and: [{ y: { $gt: 1 } }],
    });
  });

  it('refuses an upsert without the full shard key by equality with SHARD_KEY_NOT_FOUND', () => {
    expect(() => routeWrite({ filter: { y: 1 }, single: true, upsert: true, operation: 'update' }, sharded())).toThrow(
      expect.objectContaining({ code: 'SHARD_KEY_NOT_FOUND', message: expect.stringContaining('could not extract the exact shard key') }),
    );
    expect(() =>
      routeWrite({ filter: { x: { $gte: 120, $lt: 130 } }, single: false, upsert: true, operation: 'update' }, sharded()),
    ).toThrow(expect.objectContaining({ code: 'SHARD_KEY_NOT_FOUND' }));
  });

  it('refuses an unknown operator before anything is sent', () => {
    expect(() => routeWrite({ filter: { x: { $bogus: 1 } }, single: false, upsert: false, operation: 'update' }, unsharded)).toThrow(
      expect.objectContaining({ code: 'BAD_VALUE' }),
    );
    expect(() => routeFilter({ $where: 'x' }, sharded())).toThrow(expect.objectContaining({ code: 'BAD_VALUE' }));
  });
});
