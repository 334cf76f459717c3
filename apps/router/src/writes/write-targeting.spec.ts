import { Long } from 'bson';
import { describe, expect, it } from 'vitest';
import { RoutingTable, createInitialChunks, globalMaxKey, globalMinKey, parseShardKeyPattern } from '@tessera/core';
import { type WriteRouting, routeFilter, routeInsert, routeWrite } from './write-targeting.js';

/** `{x: 1}` split at 100 and 200 over shards s0, s1, s2. */
function sharded(): WriteRouting {
  const pattern = parseShardKeyPattern({ x: 1 });
  const at = { t: 1, i: 1 };
  const chunks = createInitialChunks({
    generation: { epoch: 'a'.repeat(24), timestamp: at },
    keySpace: { min: globalMinKey(pattern), max: globalMaxKey(pattern) },
    splitPoints: [[Long.fromNumber(100)], [Long.fromNumber(200)]],
    shards: ['s0', 's1', 's2'],
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
    expect(routeWrite({ filter: { x: { $gte: 120, $lt: 130 } }, single: true, upsert: false, operation: 'delete' }, sharded())).toEqual([
      's1',
    ]);
  });

  it('refuses a single-document write or an upsert that cannot be targeted to one shard with SHARD_KEY_NOT_FOUND', () => {
    expect(() => routeWrite({ filter: { y: 1 }, single: true, upsert: false, operation: 'update' }, sharded())).toThrow(
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
