/**
 * Where a hashed collection is pre-split (reference: shardCollection's `numInitialChunks`): the
 * 64-bit hash space cut into equal parts, so that a new collection's inserts, which a hash
 * spreads uniformly, fill every initial chunk at the same pace from the first write.
 */
import { Long, MinKey } from 'bson';
import type { Value } from '../values/value.js';
import type { ShardKey, ShardKeyPattern } from './shard-key-pattern.js';

/** The size of the hash space: hashes are signed 64-bit integers, from -2^63 to 2^63 - 1. */
const HASH_SPACE = 2n ** 64n;
const LOWEST_HASH = -(2n ** 63n);

/**
 * Evenly spaced points over the 64-bit hash space for `n` chunks, as MongoDB pre-splits hashed
 * keys: the k-th point is -2^63 + k * 2^64 / n, rounded toward -2^63. The fields after the
 * hashed prefix are MinKey, so every point is the lowest key of its hash. No points for a key
 * whose first field is not hashed, or for n <= 1.
 */
export function hashedSplitPoints(pattern: ShardKeyPattern, n: number): ShardKey[] {
  if (!pattern.fields[0]!.hashed || n <= 1) return [];
  const points: ShardKey[] = [];
  for (let k = 1; k < n; k++) {
    const hash = LOWEST_HASH + (HASH_SPACE * BigInt(k)) / BigInt(n);
    points.push([Long.fromBigInt(hash), ...pattern.fields.slice(1).map((): Value => new MinKey())]);
  }
  return points;
}
