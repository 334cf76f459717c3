/**
 * Randomness as a port (`Random`) and a seeded implementation for simulations and tests, so a
 * run is a function of its seed. Not for anything secret.
 */

/** A source of uniform numbers. */
export interface Random {
  /** Returns a number in [0, 1). */
  nextFloat(): number;
}

/**
 * Returns a deterministic `Random` (mulberry32: a 32-bit state advanced by the golden-ratio
 * increment and mixed by two multiply-xorshift rounds; period 2^32, good enough to jitter a
 * simulation). The same seed gives the same sequence on every platform.
 */
export function createSeededRandom(seed: number): Random {
  let state = seed >>> 0;
  return {
    nextFloat(): number {
      state = (state + 0x6d2b79f5) >>> 0;
      let t = state;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    },
  };
}

/** Returns an integer in [min, max] drawn from `random`. */
export function randomInt(random: Random, min: number, max: number): number {
  return min + Math.floor(random.nextFloat() * (max - min + 1));
}
