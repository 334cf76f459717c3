import { describe, expect, it } from 'vitest';
import { CursorRegistry } from './cursor-registry.js';
import { RouterCursor, type ShardCursorPort } from './router-cursor.js';

/** A cursor over one shard's first batch of three documents, with more left behind it. */
function openCursor(): RouterCursor {
  const port: ShardCursorPort = { getMore: async () => ({ cursorId: null, documents: [{ _id: 4 }] }), kill: async () => undefined };
  return new RouterCursor(
    'shop.orders',
    [{ shard: 'shard0', batch: { cursorId: 'c0', documents: [{ _id: 1 }, { _id: 2 }, { _id: 3 }] } }],
    {},
    port,
  );
}

describe('CursorRegistry', () => {
  it("answers another user's cursor as an unknown one, for a batch and for a kill", async () => {
    const registry = new CursorRegistry();
    const id = registry.register(openCursor(), undefined, 'alice');
    await expect(registry.next(id, 1, 'bob')).rejects.toMatchObject({
      code: 'CURSOR_NOT_FOUND',
      message: expect.not.stringContaining('alice'),
    });
    await expect(registry.next(id, 1)).rejects.toMatchObject({ code: 'CURSOR_NOT_FOUND' });
    await expect(registry.kill(id, 'bob')).rejects.toMatchObject({ code: 'CURSOR_NOT_FOUND' });
    expect((await registry.next(id, 1, 'alice')).documents).toEqual([{ _id: 1 }]);
    await registry.kill(id, 'alice');
    await expect(registry.next(id, 1, 'alice')).rejects.toMatchObject({ code: 'CURSOR_NOT_FOUND' });
  });

  it('serves a cursor opened without a user (a router that checks no callers) to a caller without one', async () => {
    const registry = new CursorRegistry();
    const id = registry.register(openCursor());
    expect((await registry.next(id, 2)).documents).toEqual([{ _id: 1 }, { _id: 2 }]);
  });
});
