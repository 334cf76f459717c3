import { describe, expect, it } from 'vitest';
import type { InternalClients } from '@tessera/platform';
import type { ShardIdentityService } from '../identity/shard-identity.service.js';
import { ShardingRuntime } from './sharding-runtime.service.js';
import type { FilteringMetadata } from './sharding-state.js';

const UNSHARDED = { info: { kind: 'unsharded' } } as unknown as FilteringMetadata;
const SHARDED = { info: { kind: 'sharded' } } as unknown as FilteringMetadata;

function runtime(): ShardingRuntime {
  return new ShardingRuntime({} as ShardIdentityService, {} as InternalClients);
}

/** Whether `promise` has settled after the event loop has run everything ready. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  void promise.then(
    () => (done = true),
    () => (done = true),
  );
  await new Promise((resolve) => setImmediate(resolve));
  return done;
}

describe("ShardingRuntime's database critical section (movePrimary)", () => {
  it("holds writes to the database's unsharded collections, and reads once it blocks them, but never sharded ones or other databases", async () => {
    const shard = runtime();
    await shard.enterDatabaseCriticalSection('app', 'move-1', false);

    const write = shard.enter('app.orders', 'write', async () => UNSHARDED);
    expect(await settled(write)).toBe(false);
    const read = shard.enter('app.orders', 'read', async () => UNSHARDED);
    expect(await settled(read)).toBe(true);
    expect(await settled(shard.enter('app.users', 'write', async () => SHARDED))).toBe(true);
    expect(await settled(shard.enter('other.orders', 'write', async () => UNSHARDED))).toBe(true);

    await shard.enterDatabaseCriticalSection('app', 'move-1', true);
    const laterRead = shard.enter('app.orders', 'read', async () => UNSHARDED);
    expect(await settled(laterRead)).toBe(false);

    shard.exitDatabaseCriticalSection('app', 'move-1');
    expect(await settled(write)).toBe(true);
    expect(await settled(laterRead)).toBe(true);
  });

  it('checks the version again after the section ends, so a waiting request learns the move committed', async () => {
    const shard = runtime();
    await shard.enterDatabaseCriticalSection('app', 'move-1', true);
    let checks = 0;
    let moved = false;
    const write = shard.enter('app.orders', 'write', async () => {
      checks++;
      if (moved) throw new Error('STALE_DB_VERSION');
      return UNSHARDED;
    });
    expect(await settled(write)).toBe(false);
    moved = true;
    shard.exitDatabaseCriticalSection('app', 'move-1');
    await expect(write).rejects.toThrow('STALE_DB_VERSION');
    expect(checks).toBe(2);
  });

  it('is taken only once the writes under way on unsharded collections have ended; sharded writes do not hold it', async () => {
    const shard = runtime();
    const unsharded = await shard.enter('app.orders', 'write', async () => UNSHARDED);
    const sharded = await shard.enter('app.users', 'write', async () => SHARDED);
    const entering = shard.enterDatabaseCriticalSection('app', 'move-1', false);
    expect(await settled(entering)).toBe(false);
    unsharded.release();
    expect(await settled(entering)).toBe(true);
    sharded.release();
  });

  it('is refused to another reason while held, and a release by another reason leaves it held', async () => {
    const shard = runtime();
    await shard.enterDatabaseCriticalSection('app', 'move-1', false);
    await expect(shard.enterDatabaseCriticalSection('app', 'move-2', false)).rejects.toMatchObject({ code: 'CONFLICTING_OPERATION' });
    shard.exitDatabaseCriticalSection('app', 'move-2');
    expect(shard.databaseCriticalSection('app')).toEqual({ reason: 'move-1', blocksReads: false });
    shard.exitDatabaseCriticalSection('app', 'move-1');
    expect(shard.databaseCriticalSection('app')).toBeUndefined();
  });
});
