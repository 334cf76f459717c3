/**
 * A shard's `ShardingRuntime` for tests that run shard code without a config server: every
 * collection is owned whole (or as `owns` says), and the leases taken are counted, so a test
 * can see a lease is held until released.
 *
 *     const runtime = ownedRuntime();
 *     ... runtime.openLeases ...
 */
import { IGNORED_VERSION } from '@tessera/core';
import type { ShardingRuntime } from '../../apps/shard/src/sharding/sharding-runtime.service.js';
import type { FilteringMetadata } from '../../apps/shard/src/sharding/sharding-state.js';

export function ownedRuntime(owns: (encodedKey: Uint8Array) => boolean = () => true): ShardingRuntime & { openLeases: number } {
  const metadata = { shardVersion: IGNORED_VERSION, owns, ownsAt: owns } as unknown as FilteringMetadata;
  const runtime = {
    openLeases: 0,
    state: async () => ({ checkShardVersion: async () => metadata }),
    enter: async (_ns: string, _kind: string, check: () => Promise<FilteringMetadata>) => {
      const checked = await check();
      runtime.openLeases++;
      let released = false;
      return {
        metadata: checked,
        release: () => {
          if (!released) runtime.openLeases--;
          released = true;
        },
      };
    },
  };
  return runtime as unknown as ShardingRuntime & { openLeases: number };
}
