// Shard key generators. Randomness comes in as a function (k6's Math.random, or a seeded one in
// tests), so every generator is deterministic for a given source.

/** A source of uniformly distributed numbers in [0, 1). */
export type RandomSource = () => number;

/** Shard key patterns the workloads shard on. */
export const SHARD_KEYS = {
  /** Ranged on an increasing number: every insert lands in the top chunk. */
  monotonic: { x: 1 },
  /** Hashed: inserts spread over pre-split chunks on every shard. */
  hashed: { x: 'hashed' },
  /** Ranged on uniformly random numbers: inserts land everywhere. */
  random: { x: 1 },
  /** crud-mix: ranged on a scrambled id, so seeded keys are spread over the key space. */
  crud: { k: 1 },
  /** retryable-writes: hashed on _id, pre-split, so every shard takes writes and the balancer has little to move. */
  retryable: { _id: 'hashed' },
  /** transactions: hashed on the account number, pre-split, so a transfer joins two shards unless both accounts hash to one. */
  accounts: { _id: 'hashed' },
  /** router-roll: hashed on _id, pre-split, so a roll measures the routers and not a hot shard or the balancer. */
  roll: { _id: 'hashed' },
} as const;

/** Random ranged keys fall in [0, RANDOM_KEY_SPACE). */
export const RANDOM_KEY_SPACE = 2 ** 31;

/**
 * The keys of one insert batch of a monotonic workload: iteration `n` of the test (k6's
 * `scenario.iterationInTest`, unique across VUs) takes [n * batch, (n + 1) * batch). Unique in
 * the run, and increasing with time up to the interleaving of concurrent requests.
 */
export function monotonicKeys(iterationInTest: number, batch: number): number[] {
  return Array.from({ length: batch }, (_, i) => iterationInTest * batch + i);
}

/** `batch` uniformly random integers in [0, RANDOM_KEY_SPACE). Duplicates are allowed: `_id` stays unique. */
export function randomKeys(random: RandomSource, batch: number): number[] {
  return Array.from({ length: batch }, () => Math.floor(random() * RANDOM_KEY_SPACE));
}

/**
 * A bijection of [0, 2^31) that spreads consecutive ids over the key space (multiplication by an
 * odd constant modulo 2^31), so crud-mix can compute the shard key of seed document `id` without
 * remembering it and still have keys everywhere.
 */
export function scrambleId(id: number): number {
  // Split the multiplication so every intermediate value stays an exact integer in a double.
  const a = 0x5bd1e995 % RANDOM_KEY_SPACE;
  const high = Math.floor(id / 65536);
  const low = id % 65536;
  const highPart = ((high * a) % RANDOM_KEY_SPACE) * 65536;
  return (highPart + low * a) % RANDOM_KEY_SPACE;
}

/** A seeded generator (mulberry32) for tests and reproducible runs. */
export function seededRandom(seed: number): RandomSource {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
