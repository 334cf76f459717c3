import { describe, expect, it } from 'vitest';
import { mergeShardTransactions } from './cluster-transactions.service.js';

describe('mergeShardTransactions', () => {
  it('gives one entry per transaction, its furthest phase, earliest start, coordinator and collections', () => {
    const merged = mergeShardTransactions([
      {
        shard: 'shard0',
        answer: {
          participants: [
            {
              lsid: 'a',
              txnNumber: 1,
              state: 'prepared',
              startedAt: '2026-11-26T10:00:02.000Z',
              coordinator: 'shard0',
              namespaces: ['db.x'],
            },
            { lsid: 'b', txnNumber: 4, state: 'inProgress', startedAt: '2026-11-26T10:00:01.000Z', coordinator: null, namespaces: [] },
          ],
          coordinating: [{ lsid: 'a', txnNumber: 1, phase: 'committing', participants: ['shard0', 'shard1'] }],
        },
      },
      {
        shard: 'shard1',
        answer: {
          participants: [
            { lsid: 'a', txnNumber: 1, state: 'reserved', startedAt: '2026-11-26T10:00:01.500Z', coordinator: null, namespaces: ['db.y'] },
            { lsid: 'b', txnNumber: 4, state: 'recovered', startedAt: null, coordinator: 'shard1', namespaces: [] },
          ],
          coordinating: [],
        },
      },
    ]);
    expect(merged).toEqual([
      {
        lsid: 'b',
        txnNumber: 4,
        state: 'prepared',
        startedAt: '2026-11-26T10:00:01.000Z',
        coordinator: 'shard1',
        participants: [
          { shard: 'shard0', state: 'inProgress' },
          { shard: 'shard1', state: 'recovered' },
        ],
        namespaces: [],
      },
      {
        lsid: 'a',
        txnNumber: 1,
        state: 'committing',
        startedAt: '2026-11-26T10:00:01.500Z',
        coordinator: 'shard0',
        participants: [
          { shard: 'shard0', state: 'prepared' },
          { shard: 'shard1', state: 'reserved' },
        ],
        namespaces: ['db.x', 'db.y'],
      },
    ]);
  });
});
