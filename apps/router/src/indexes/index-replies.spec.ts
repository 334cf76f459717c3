import { describe, expect, it } from 'vitest';
import { TesseraError } from '@tessera/core';
import { mergeCreateIndexesReplies, mergeDropIndexesReplies } from './index-replies.js';

describe('createIndexes answers', () => {
  it('count the fewest indexes before and the most after, over the shards', () => {
    expect(
      mergeCreateIndexesReplies([
        { numIndexesBefore: 3, numIndexesAfter: 3, createdCollectionAutomatically: false },
        { numIndexesBefore: 2, numIndexesAfter: 3, createdCollectionAutomatically: false },
      ]),
    ).toEqual({ numIndexesBefore: 2, numIndexesAfter: 3, ok: 1 });
  });

  it('say when a shard created the collection', () => {
    expect(mergeCreateIndexesReplies([{ numIndexesBefore: 1, numIndexesAfter: 2, createdCollectionAutomatically: true }])).toMatchObject({
      createdCollectionAutomatically: true,
    });
  });
});

describe('dropIndexes answers', () => {
  const notFound = new TesseraError('NOT_FOUND', 'index not found with name [a_1]');
  it.each([
    [
      'a shard without the collection does not fail a drop another shard did',
      [
        { shard: 'a', reply: { nIndexesWas: 0 } },
        { shard: 'b', reply: { nIndexesWas: 3 } },
      ],
      false,
      { nIndexesWas: 3, ok: 1 },
    ],
    [
      'a shard without the index does not fail a drop another shard did',
      [
        { shard: 'a', error: notFound },
        { shard: 'b', reply: { nIndexesWas: 3 } },
      ],
      false,
      { nIndexesWas: 3, ok: 1 },
    ],
    ['a retry after an earlier round dropped the index succeeds', [{ shard: 'a', error: notFound }], true, { nIndexesWas: 0, ok: 1 }],
  ] as const)('%s', (_name, replies, droppedBefore, expected) => {
    expect(mergeDropIndexesReplies('d.c', 'a_1', replies as never, droppedBefore)).toEqual(expected);
  });

  it('an index no shard has is not found; a collection no shard has is a missing namespace', () => {
    expect(() => mergeDropIndexesReplies('d.c', 'a_1', [{ shard: 'a', error: notFound }], false)).toThrow(/index not found/);
    expect(() => mergeDropIndexesReplies('d.c', 'a_1', [{ shard: 'a', reply: { nIndexesWas: 0 } }], false)).toThrow(/ns not found/);
  });

  it('another error of any shard fails the drop', () => {
    const stale = new TesseraError('STALE_CONFIG', 'stale');
    expect(() =>
      mergeDropIndexesReplies(
        'd.c',
        'a_1',
        [
          { shard: 'a', error: stale },
          { shard: 'b', reply: { nIndexesWas: 3 } },
        ],
        false,
      ),
    ).toThrow(/stale/);
  });
});
