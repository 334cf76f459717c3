/** How long and how hard bench:crud runs; read once from the environment and passed to each phase. */
export interface CrudSettings {
  /** Each run's measured length, once its warm-up is over. */
  readonly seconds: number;
  /**
   * Warm-up windows, of throughput and of point reads alike. Reads come one at a time, a few
   * hundred a second, so their code reaches the JIT's optimizing tier slowly (tens of seconds):
   * shorter windows are noisy enough to look steady while the p50 is still falling.
   */
  readonly windowSeconds: number;
  /**
   * Reads warm up at least this long, steady or not: their code warms slowly (see windowSeconds),
   * and three noisy windows can pass for steady early, with the p50 still well above its warm
   * value (docs/benchmarks.md).
   */
  readonly readWarmupMinSeconds: number;
  /**
   * Insert runs warm up at least this long too. The first run starts on a fresh cluster, and its
   * rate climbs for about 30 s, with dips that can pass for steady before that (docs/benchmarks.md).
   */
  readonly insertWarmupMinSeconds: number;
  /** Each run first goes unmeasured until its figure stops climbing (see steady-state.ts), for this long at the most. */
  readonly warmupMaxSeconds: number;
  /** Insert loops running at once. */
  readonly concurrency: number;
  /** Measured point reads of each way. */
  readonly reads: number;
  /** The measured reads of each way come in this many slices, the ways taking turns (see crud-reads.ts). */
  readonly readSlices: number;
  /** The floor's store processes, one where each shard is. */
  readonly floorStores: number;
  /** Before the reads, the machine's busy CPU must fall under this many ms per second (idle, with the cluster up, it spends 100-150)... */
  readonly settleQuietMsPerSecond: number;
  /** ...over a window this long... */
  readonly settleWindowSeconds: number;
  /** ...waiting this long at the most. */
  readonly settleMaxSeconds: number;
}

/** The settings, with `BENCH_SECONDS`, `BENCH_WARMUP_MAX_SECONDS`, `BENCH_CONCURRENCY`, `BENCH_READS` and `BENCH_SETTLE_MAX_SECONDS` from `env`. */
export function readCrudSettings(env: NodeJS.ProcessEnv): CrudSettings {
  return {
    seconds: Number(env.BENCH_SECONDS ?? 6),
    windowSeconds: 3,
    readWarmupMinSeconds: 30,
    insertWarmupMinSeconds: 30,
    warmupMaxSeconds: Number(env.BENCH_WARMUP_MAX_SECONDS ?? 90),
    concurrency: Number(env.BENCH_CONCURRENCY ?? 16),
    reads: Number(env.BENCH_READS ?? 2_000),
    readSlices: 4,
    floorStores: 3,
    settleQuietMsPerSecond: 200,
    settleWindowSeconds: 2,
    settleMaxSeconds: Number(env.BENCH_SETTLE_MAX_SECONDS ?? 90),
  };
}

/** The benchmarked collections' shard key; the raw baseline and the floor's stores encode the same key. */
export const SHARD_KEY = { k: 'hashed' } as const;

const payload = 'x'.repeat(150);

/** The document of key `k`: about 200 bytes once stored. */
export const documentFor = (k: number) => ({ k, n: k, payload });
