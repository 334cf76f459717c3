import 'reflect-metadata';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DataSource } from 'typeorm';
import { configMigrations } from '../migrations/index.js';
import { runMigrations } from '../libs/platform/src/index.js';
import { type ChunkVersion, RoutingTable, percentile } from '../libs/core/src/index.js';
import { chunkFromWire, shardKeyToWire } from '../libs/protocol/src/index.js';
import { catalogServices, k, wireRange } from '../apps/config/src/catalog/catalog-fixture.js';
import { seedShardedCollection } from '../apps/config/src/catalog/catalog-seed.js';
import { freePort } from '../tools/cluster/local-cluster.js';
import { startEmbeddedPostgres } from '../tools/cluster/postgres.js';

/**
 * bench:catalog — the config server's catalog on a real (embedded) Postgres, measured at the
 * service level (no HTTP): commitSplit latency p50/p99 on a collection of CHUNKS chunks, and
 * getChunks for one changed chunk (incremental, through the version index) against a full
 * fetch of every chunk, with their ratio. Durable Postgres settings unless BENCH_PG_FAST=1.
 */
const CHUNKS = Number(process.env.BENCH_CHUNKS ?? 100_000);
const SPLITS = Number(process.env.BENCH_SPLITS ?? 300);
const KEY_STEP = 10;
const NS = 'bench.chunks';

function median(values: number[]): number {
  return percentile(
    [...values].sort((a, b) => a - b),
    50,
  );
}

async function timeMs<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const start = process.hrtime.bigint();
  const value = await fn();
  return { ms: Number(process.hrtime.bigint() - start) / 1e6, value };
}

const fmt = (ms: number) => (ms < 10 ? `${ms.toFixed(2)} ms` : `${ms.toFixed(0)} ms`);

// Long: the benchmark's script, one measured step after another.
async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-bench-catalog-'));
  chmodSync(dir, 0o755);
  const fast = process.env.BENCH_PG_FAST === '1';
  const server = await startEmbeddedPostgres({ dataDir: join(dir, 'data'), port: await freePort(), unsafeFast: fast });
  let dataSource: DataSource | undefined;
  try {
    await server.ensureDatabase('tessera_bench');
    const url = server.urlFor('tessera_bench');
    await runMigrations(url, configMigrations);
    dataSource = new DataSource({ type: 'postgres', url, extra: { max: 4 }, logging: false });
    await dataSource.initialize();
    const { commits, reads } = catalogServices(dataSource, 'bench');
    console.log(
      `bench:catalog — ${CHUNKS.toLocaleString('en')} chunks, embedded Postgres (${fast ? 'fsync off' : 'durable'}), ${process.version}`,
    );

    const seeded = await timeMs(() =>
      seedShardedCollection(dataSource!, {
        ns: NS,
        shards: ['shard0', 'shard1', 'shard2', 'shard3'],
        splitPoints: Array.from({ length: CHUNKS - 1 }, (_, i) => k((i + 1) * KEY_STEP)),
      }),
    );
    await dataSource.query('ANALYZE');
    console.log(`  seed ${CHUNKS.toLocaleString('en')} chunk rows: ${fmt(seeded.ms)}`);

    // commitSplit: split distinct chunks [10i, 10i+10) at 10i+5, the version carried over as a
    // shard would carry it from its last commit.
    let cv: ChunkVersion = (await reads.getCollection(NS)).collectionVersion;
    const latencies: number[] = [];
    const stride = Math.max(1, Math.floor((CHUNKS - 2) / SPLITS));
    for (let s = 0; s < SPLITS; s++) {
      const i = 1 + ((s * stride) % (CHUNKS - 2));
      const chunk = seeded.value.chunks[i]!;
      const min = i * KEY_STEP;
      const { ms, value } = await timeMs(() =>
        commits.commitSplit({
          ns: NS,
          shard: chunk.shard,
          range: wireRange(min, min + KEY_STEP),
          splitPoints: [shardKeyToWire(k(min + KEY_STEP / 2))],
          expectedCollectionVersion: cv,
        }),
      );
      latencies.push(ms);
      cv = value.collectionVersion;
    }
    latencies.sort((a, b) => a - b);
    console.log(
      `  commitSplit (${SPLITS} sequential): p50 ${fmt(percentile(latencies, 50))}, p99 ${fmt(percentile(latencies, 99))}, max ${fmt(latencies[latencies.length - 1]!)}`,
    );

    // Full fetch: every chunk, decoded and in wire form, as a router with an empty cache asks.
    const fullRuns: number[] = [];
    let full = await reads.getChunks({ ns: NS });
    for (let r = 0; r < 5; r++) {
      const run = await timeMs(() => reads.getChunks({ ns: NS }));
      fullRuns.push(run.ms);
      full = run.value;
    }
    const rebuild = await timeMs(async () => RoutingTable.fromChunks(full.chunks.map(chunkFromWire)));

    // One changed chunk: a jumbo chunk cleared (one chunk bumped to <Mcv, mcv+1>).
    const target = seeded.value.chunks[CHUNKS - 3]!;
    const jumboRange = wireRange((CHUNKS - 3) * KEY_STEP, (CHUNKS - 2) * KEY_STEP);
    await commits.markJumbo({ ns: NS, generation: seeded.value.generation, range: jumboRange });
    const since = full.collectionVersion;
    await commits.clearJumbo({ ns: NS, range: jumboRange, expectedCollectionVersion: since });
    const incrementalRuns: number[] = [];
    let delta = await reads.getChunks({ ns: NS, sinceVersion: since });
    for (let r = 0; r < 50; r++) {
      const run = await timeMs(() => reads.getChunks({ ns: NS, sinceVersion: since }));
      incrementalRuns.push(run.ms);
      delta = run.value;
    }
    if (delta.full || delta.chunks.length !== 1 || delta.chunks[0]!.shard !== target.shard)
      throw new Error('the incremental read did not return exactly the changed chunk');
    const apply = await timeMs(async () => rebuild.value.applyChanges(delta.chunks.map(chunkFromWire)));

    const fullMs = median(fullRuns);
    const incrementalMs = median(incrementalRuns);
    console.log(
      `  getChunks full (${full.chunks.length.toLocaleString('en')} chunks, median of 5): ${fmt(fullMs)}; RoutingTable.fromChunks on it: ${fmt(rebuild.ms)}`,
    );
    console.log(`  getChunks incremental (1 changed chunk, median of 50): ${fmt(incrementalMs)}; applyChanges: ${fmt(apply.ms)}`);
    console.log(`  full / incremental: ${(fullMs / incrementalMs).toFixed(0)}x`);
  } finally {
    await dataSource?.destroy();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
