import { describe, expect, it } from 'vitest';
import { TesseraError } from '@tessera/core';
import type { InsertCommandResult } from '@tessera/protocol';
import { executeWriteBatch } from './write-execution.js';
import { type ChildBatch, planWriteWaves } from './write-plan.js';

/** Statements by the shard each goes to: `routed('A', 'A', 'B')`. */
function routed(...shards: Array<string | string[]>) {
  return shards.map((s, index) => ({ index, shards: Array.isArray(s) ? s : [s] }));
}

const badValue = (index: number) => ({ index, error: new TesseraError('BAD_VALUE', `bad ${index}`).toEnvelope() });

describe('planning child batches', () => {
  it('an ordered batch sends consecutive runs for one shard in order', () => {
    const plan = planWriteWaves(routed('A', 'A', 'B', 'A', 'A'), [], true);
    expect(plan.waves).toEqual([[{ shard: 'A', indexes: [0, 1] }], [{ shard: 'B', indexes: [2] }], [{ shard: 'A', indexes: [3, 4] }]]);
  });

  it('an unordered batch sends one child batch per shard, all at once', () => {
    const plan = planWriteWaves(routed('A', 'B', 'A', ['A', 'B']), [], false);
    expect(plan.waves).toEqual([
      [
        { shard: 'A', indexes: [0, 2, 3] },
        { shard: 'B', indexes: [1, 3] },
      ],
    ]);
  });

  it('an ordered statement for several shards is a wave of its own', () => {
    const plan = planWriteWaves(routed('A', ['A', 'B'], 'B'), [], true);
    expect(plan.waves).toEqual([
      [{ shard: 'A', indexes: [0] }],
      [
        { shard: 'A', indexes: [1] },
        { shard: 'B', indexes: [1] },
      ],
      [{ shard: 'B', indexes: [2] }],
    ]);
  });

  it('an ordered batch is cut at the first statement the router refused', () => {
    const statements = routed('A', 'B', 'A', 'A').filter((s) => s.index !== 2);
    const plan = planWriteWaves(statements, [badValue(2)], true);
    expect(plan.waves.flat().flatMap((b) => b.indexes)).toEqual([0, 1]);
    expect(plan.routerErrors.map((e) => e.index)).toEqual([2]);
  });
});

/** A fake cluster: each shard answers inserts, failing the statements (by user index) listed in `failAt`. */
function fakeShards(options: { failAt?: number[]; staleOnce?: string } = {}) {
  const sent: ChildBatch[] = [];
  let staleLeft = options.staleOnce ? 1 : 0;
  return {
    sent,
    send: async (batch: ChildBatch): Promise<InsertCommandResult> => {
      sent.push(batch);
      if (batch.shard === options.staleOnce && staleLeft-- > 0) throw new TesseraError('STALE_CONFIG', 'stale');
      const failing = batch.indexes.findIndex((i) => options.failAt?.includes(i));
      const upTo = failing === -1 ? batch.indexes.length : failing;
      return {
        insertedCount: upTo,
        inserted: batch.indexes.slice(0, upTo).map((_, local) => local),
        writeErrors:
          failing === -1
            ? []
            : [{ index: failing, error: new TesseraError('DUPLICATE_KEY', 'dup', { details: { index: failing } }).toEnvelope() }],
      };
    },
  };
}

describe('running a write batch', () => {
  it('maps a shard batch error back to the user index, in its details too, and stops an ordered batch there', async () => {
    const shards = fakeShards({ failAt: [3] });
    const statements = routed('A', 'B', 'B', 'B', 'A');
    const result = await executeWriteBatch(5, true, {
      route: async (indexes) => ({ statements: statements.filter((s) => indexes.includes(s.index)), routerErrors: [] }),
      send: shards.send,
      handleStale: () => false,
    });
    expect(result.writeErrors).toEqual([{ index: 3, error: expect.objectContaining({ code: 'DUPLICATE_KEY', details: { index: 3 } }) }]);
    expect(shards.sent.map((b) => b.shard)).toEqual(['A', 'B']);
    expect(result.replies.flatMap(({ batch, reply }) => reply.inserted.map((local) => batch.indexes[local]))).toEqual([0, 1, 2]);
  });

  it('goes on after an error when unordered', async () => {
    const shards = fakeShards({ failAt: [1] });
    const result = await executeWriteBatch(4, false, {
      route: async () => ({ statements: routed('A', 'B', 'A').map((s) => s), routerErrors: [badValue(3)] }),
      send: shards.send,
      handleStale: () => false,
    });
    expect(result.writeErrors.map((e) => [e.index, e.error.code])).toEqual([
      [1, 'DUPLICATE_KEY'],
      [3, 'BAD_VALUE'],
    ]);
    expect(result.replies.flatMap(({ batch, reply }) => reply.inserted.map((local) => batch.indexes[local])).sort()).toEqual([0, 2]);
  });

  it('reports a router error of an ordered batch only when nothing failed before it', async () => {
    const route = async () => ({ statements: routed('A', 'A'), routerErrors: [badValue(2)] });
    const clean = await executeWriteBatch(3, true, { route, send: fakeShards().send, handleStale: () => false });
    expect(clean.writeErrors.map((e) => e.index)).toEqual([2]);
    const failing = await executeWriteBatch(3, true, { route, send: fakeShards({ failAt: [0] }).send, handleStale: () => false });
    expect(failing.writeErrors.map((e) => e.index)).toEqual([0]);
  });

  it('routes again and resends only the child batch that met stale routing', async () => {
    const shards = fakeShards({ staleOnce: 'B' });
    let round = 0;
    const result = await executeWriteBatch(3, false, {
      route: async (indexes) => {
        round++;
        // After the refresh, statement 1 lives on shard C.
        const table = round === 1 ? routed('A', 'B', 'A') : routed('A', 'C', 'A');
        return { statements: table.filter((s) => indexes.includes(s.index)), routerErrors: [] };
      },
      send: shards.send,
      handleStale: (error) => error instanceof TesseraError && error.code === 'STALE_CONFIG',
    });
    expect(result.writeErrors).toEqual([]);
    expect(shards.sent).toEqual([
      { shard: 'A', indexes: [0, 2] },
      { shard: 'B', indexes: [1] },
      { shard: 'C', indexes: [1] },
    ]);
  });

  it('does not send a multi-shard statement again to a shard that ran it', async () => {
    const shards = fakeShards({ staleOnce: 'B' });
    const result = await executeWriteBatch(2, false, {
      route: async (indexes) => ({
        statements: [
          { index: 0, shards: ['A', 'B'] },
          { index: 1, shards: ['A'] },
        ].filter((s) => indexes.includes(s.index)),
        routerErrors: [],
      }),
      send: shards.send,
      handleStale: (error) => error instanceof TesseraError && error.code === 'STALE_CONFIG',
    });
    expect(result.writeErrors).toEqual([]);
    expect(shards.sent).toEqual([
      { shard: 'A', indexes: [0, 1] },
      { shard: 'B', indexes: [0] },
      { shard: 'B', indexes: [0] },
    ]);
  });

  it('retries an ordered batch from the stale child batch on, keeping the order', async () => {
    const shards = fakeShards({ staleOnce: 'B' });
    const result = await executeWriteBatch(4, true, {
      route: async (indexes) => ({ statements: routed('A', 'B', 'A', 'A').filter((s) => indexes.includes(s.index)), routerErrors: [] }),
      send: shards.send,
      handleStale: (error) => error instanceof TesseraError && error.code === 'STALE_CONFIG',
    });
    expect(result.writeErrors).toEqual([]);
    expect(shards.sent).toEqual([
      { shard: 'A', indexes: [0] },
      { shard: 'B', indexes: [1] },
      { shard: 'B', indexes: [1] },
      { shard: 'A', indexes: [2, 3] },
    ]);
  });

  it('turns a failed child batch into a write error for each of its statements', async () => {
    const result = await executeWriteBatch(3, false, {
      route: async () => ({ statements: routed('A', 'B', 'B'), routerErrors: [] }),
      send: async (batch) => {
        if (batch.shard === 'B') throw new TesseraError('HOST_UNREACHABLE', 'down');
        return { writeErrors: [] };
      },
      handleStale: () => false,
    });
    expect(result.writeErrors.map((e) => [e.index, e.error.code])).toEqual([
      [1, 'HOST_UNREACHABLE'],
      [2, 'HOST_UNREACHABLE'],
    ]);
  });
});
