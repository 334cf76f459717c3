import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ValueObject } from '@tessera/core';
import { bsonSize, compileProjection, compileSort } from '@tessera/query';
import { RouterCursor, type ShardBatch, type ShardCursorPort } from './router-cursor.js';
import { planShardFind } from './find-plan.js';

/**
 * In-memory shards serving fixed documents in batches of `batchSize` through the port, the way
 * a shard cursor would (its first batch is given, getMore serves the rest).
 */
function fakeShards(perShard: ValueObject[][], batchSize: number) {
  const positions = new Map<string, number>();
  const killed: string[] = [];
  const serve = (shard: string, from: number, size: number): ShardBatch => {
    const all = perShard[Number(shard)]!;
    const documents = all.slice(from, from + size);
    const next = from + documents.length;
    positions.set(shard, next);
    return { cursorId: next < all.length ? `c${shard}` : null, documents };
  };
  const port: ShardCursorPort = {
    getMore: async (shard, _cursorId, size) => serve(shard, positions.get(shard)!, size),
    kill: async (shard) => void killed.push(shard),
  };
  const first = perShard.map((_, i) => ({ shard: String(i), batch: serve(String(i), 0, batchSize) }));
  return { port, first, killed };
}

async function drain(cursor: RouterCursor, batchSize: number): Promise<ValueObject[]> {
  const out: ValueObject[] = [];
  for (let i = 0; i < 10_000 && !cursor.isExhausted; i++) out.push(...(await cursor.nextBatch(batchSize)));
  return out;
}

const byA = compileSort({ a: 1, b: -1 });
const documentArb = fc.record({
  a: fc.oneof(fc.integer({ min: -5, max: 5 }), fc.constantFrom('x', 'y', null)),
  b: fc.integer({ min: 0, max: 3 }),
});
const shardsArb = fc.array(fc.array(documentArb, { maxLength: 12 }), { minLength: 1, maxLength: 4 });

describe('the router cursor', () => {
  it('merge-sorting sorted shard batches equals sorting the union', async () => {
    await fc.assert(
      fc.asyncProperty(
        shardsArb,
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 1, max: 7 }),
        async (shards, shardBatch, routerBatch) => {
          const sorted = shards.map((docs) => [...docs].sort(byA));
          const { port, first } = fakeShards(sorted, shardBatch);
          const merged = await drain(new RouterCursor('db.c', first, { compare: byA }, port), routerBatch);
          const expected = sorted.flat().sort(byA);
          // Documents equal under {a: 1, b: -1} are identical, so the order is fully determined.
          expect(merged).toEqual(expected);
        },
      ),
    );
  });

  it('applies skip and limit after the merge', async () => {
    await fc.assert(
      fc.asyncProperty(shardsArb, fc.nat(15), fc.nat(15), async (shards, skip, limit) => {
        const sorted = shards.map((docs) => [...docs].sort(byA));
        // Each shard serves the window planShardFind asks it for (skip + limit from its start when there are several).
        const plan = planShardFind({ filter: {}, sort: { a: 1, b: -1 }, skip, limit, batchSize: 101 }, shards.length);
        const from = plan.command.skip ?? 0;
        const window = sorted.map((docs) => docs.slice(from, plan.command.limit === undefined ? undefined : from + plan.command.limit));
        const { port, first } = fakeShards(window, 3);
        const merged = await drain(new RouterCursor('db.c', first, { compare: byA, skip: plan.routerSkip, limit }, port), 4);
        const all = sorted.flat().sort(byA).slice(skip);
        const expected = limit > 0 ? all.slice(0, limit) : all;
        expect(merged.length).toBe(expected.length);
        merged.forEach((d, i) => expect(byA(d, expected[i]!)).toBe(0));
      }),
    );
  });

  it('reads the shards one after another without a sort', async () => {
    const { port, first } = fakeShards([[{ n: 1 }, { n: 2 }], [], [{ n: 3 }]], 1);
    expect(await drain(new RouterCursor('db.c', first, {}, port), 2)).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
  });

  it('kills the shard cursors still open once the limit is reached', async () => {
    const { port, first, killed } = fakeShards(
      [
        [{ a: 1 }, { a: 3 }, { a: 5 }],
        [{ a: 2 }, { a: 4 }],
      ],
      1,
    );
    const cursor = new RouterCursor('db.c', first, { compare: byA, limit: 2 }, port);
    expect(await cursor.nextBatch(10)).toEqual([{ a: 1 }, { a: 2 }]);
    expect(cursor.isExhausted).toBe(true);
    expect(killed.sort()).toEqual(['0', '1']);
  });

  it('projects on the router when asked, after merging on the whole documents', async () => {
    const { port, first } = fakeShards([[{ a: 2, b: 0 }], [{ a: 1, b: 0 }]], 1);
    const cursor = new RouterCursor('db.c', first, { compare: byA, project: (d) => ({ b: d['b']! }) }, port);
    expect(await drain(cursor, 5)).toEqual([{ b: 0 }, { b: 0 }]);
  });
});

describe("the router cursor's batches by size", () => {
  it('end before the document that would take them past maxBatchBytes, hold one however large, and lose none', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(fc.record({ a: fc.integer({ min: -5, max: 5 }), pad: fc.string({ maxLength: 40 }) }), { maxLength: 12 }), {
          minLength: 1,
          maxLength: 4,
        }),
        fc.integer({ min: 1, max: 200 }),
        fc.boolean(),
        fc.integer({ min: 0, max: 5 }),
        fc.integer({ min: 0, max: 20 }),
        async (shards, maxBatchBytes, sorted, skip, limit) => {
          const compare = compileSort({ a: 1, pad: 1 });
          const perShard = sorted ? shards.map((docs) => [...docs].sort(compare)) : shards;
          const { port, first } = fakeShards(perShard, 3);
          const cursor = new RouterCursor('db.c', first, { ...(sorted ? { compare } : {}), maxBatchBytes, skip, limit }, port);
          const merged = sorted ? perShard.flat().sort(compare) : perShard.flat();
          const expected = merged.slice(skip, limit > 0 ? skip + limit : undefined);
          const all: ValueObject[] = [];
          for (let i = 0; i < 1_000 && !cursor.isExhausted; i++) {
            const batch = await cursor.nextBatch(101);
            const bytes = batch.reduce((sum, d) => sum + bsonSize(d), 0);
            if (batch.length > 1) expect(bytes).toBeLessThanOrEqual(maxBatchBytes);
            all.push(...batch);
            // A batch cut short ends just before the document that would not fit.
            if (batch.length < 101 && !cursor.isExhausted) expect(bytes + bsonSize(expected[all.length]!)).toBeGreaterThan(maxBatchBytes);
          }
          expect(all).toEqual(expected);
        },
      ),
    );
  });

  it("size the documents as returned, after the router's projection", async () => {
    const { port, first } = fakeShards(
      [
        [
          { a: 1, pad: 'x'.repeat(100) },
          { a: 2, pad: 'y'.repeat(100) },
        ],
      ],
      2,
    );
    const cursor = new RouterCursor('db.c', first, { project: compileProjection({ pad: 0 }), maxBatchBytes: 40 }, port);
    expect(await cursor.nextBatch(101)).toEqual([{ a: 1 }, { a: 2 }]);
  });
});

describe('planning a find', () => {
  it('pushes everything down to a single shard', () => {
    const plan = planShardFind({ filter: { x: 1 }, sort: { a: 1 }, projection: { a: 1 }, skip: 5, limit: 10, batchSize: 101 }, 1);
    expect(plan).toEqual({
      command: { filter: { x: 1 }, sort: { a: 1 }, projection: { a: 1 }, skip: 5, limit: 10, batchSize: 10 },
      routerSkip: 0,
      mergeSorted: false,
      projectOnRouter: false,
    });
  });

  it('asks each of several shards for skip + limit from their start and skips on the router', () => {
    const plan = planShardFind({ filter: {}, sort: { a: 1 }, projection: { a: 1 }, skip: 5, limit: 10, batchSize: 101 }, 3);
    expect(plan).toEqual({
      command: { filter: {}, sort: { a: 1 }, limit: 15, batchSize: 15 },
      routerSkip: 5,
      mergeSorted: true,
      projectOnRouter: true,
    });
  });
});
