import { MaxKey, MinKey } from 'bson';
import {
  createSeededRandom,
  encodeKey,
  RoutingTable,
  type Chunk,
  type ChunkVersion,
  type CollectionGeneration,
  type ShardKey,
} from '../libs/core/src/index.js';

/**
 * bench:routing — the routing table's costs at 10k, 100k and 1M chunks: `chunkFor` (median
 * ns/op over batches of random keys, from key values and from pre-encoded bytes),
 * `applyChanges` with 1 and 1,000 changed chunks, a full rebuild (`RoutingTable.fromChunks`
 * on the whole chunk list, validation included), their ratio, and heap bytes per chunk.
 * Run with `node --expose-gc` so heap figures are taken after a collection.
 * Targets (issue 3): chunkFor <= 1 us at 1M chunks; incremental(1) >= 100x faster than a rebuild.
 */
const SIZES = (process.env.BENCH_SIZES ?? '10000,100000,1000000').split(',').map(Number);
const SHARDS = ['shard0', 'shard1', 'shard2', 'shard3'];
const GEN: CollectionGeneration = { epoch: '65a000000000000000000001', timestamp: { t: 1, i: 0 } };
const KEY_STEP = 10;

function buildChunks(n: number): Chunk[] {
  const chunks: Chunk[] = new Array<Chunk>(n);
  for (let i = 0; i < n; i++) {
    const shard = SHARDS[i % SHARDS.length] as string;
    chunks[i] = {
      range: { min: i === 0 ? [new MinKey()] : [i * KEY_STEP], max: i === n - 1 ? [new MaxKey()] : [(i + 1) * KEY_STEP] },
      shard,
      version: { ...GEN, major: 1, minor: i },
      history: [{ validAfter: { t: 1, i: 0 }, shard }],
    };
  }
  return chunks;
}

function nowNs(): bigint {
  return process.hrtime.bigint();
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

function timeOnce(fn: () => unknown): number {
  const start = nowNs();
  fn();
  return Number(nowNs() - start);
}

function heapUsed(): number {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc) {
    gc();
    gc();
  }
  const usage = process.memoryUsage();
  return usage.heapUsed + usage.arrayBuffers; // typed arrays (key prefixes) live outside the JS heap
}

function fmtNs(ns: number): string {
  if (ns >= 1e9) return `${(ns / 1e9).toFixed(2)} s`;
  if (ns >= 1e6) return `${(ns / 1e6).toFixed(2)} ms`;
  if (ns >= 1e3) return `${(ns / 1e3).toFixed(1)} us`;
  return `${ns.toFixed(0)} ns`;
}

/** Median ns per lookup over batches of `batch` random keys. */
function benchLookups(table: RoutingTable, keys: readonly (ShardKey | Uint8Array)[], batches: number, batch: number): number {
  const perOp: number[] = [];
  let sink = 0;
  for (let b = 0; b < batches; b++) {
    const offset = (b * batch) % keys.length;
    const ns = timeOnce(() => {
      // The result is only checked for presence: reading its fields would add the caller's cache misses.
      for (let k = 0; k < batch; k++) if (table.chunkFor(keys[(offset + k) % keys.length] as ShardKey) !== undefined) sink++;
    });
    perOp.push(ns / batch);
  }
  if (sink === -1) console.log(sink);
  return median(perOp);
}

/** `count` changed chunks: distinct random chunks moved to another shard with fresh versions. */
function manyMoves(chunks: readonly Chunk[], cv: ChunkVersion, count: number, random: () => number): Chunk[] {
  const picked = new Set<number>();
  while (picked.size < Math.min(count, chunks.length)) picked.add(Math.floor(random() * chunks.length));
  return [...picked].map((index, k) => {
    const chunk = chunks[index] as Chunk;
    const shard = SHARDS[(SHARDS.indexOf(chunk.shard) + 1) % SHARDS.length] as string;
    return { ...chunk, shard, version: { ...cv, major: cv.major + 1, minor: k }, history: [{ validAfter: { t: 2, i: k }, shard }, ...chunk.history] };
  });
}

function run(): void {
  console.log(`bench:routing  node ${process.version}  gc ${typeof (globalThis as { gc?: unknown }).gc === 'function' ? 'exposed' : 'NOT exposed (heap figures are rough)'}`);
  const rows: string[][] = [];
  for (const n of SIZES) {
    // Seeded (mulberry32), so runs are comparable.
    const seeded = createSeededRandom(n);
    const random = () => seeded.nextFloat();
    const h0 = heapUsed();
    const chunks = buildChunks(n);
    const h1 = heapUsed();
    let table = RoutingTable.fromChunks(chunks);
    const h2 = heapUsed();

    const rebuildRuns = n >= 1_000_000 ? 3 : n >= 100_000 ? 5 : 15;
    const rebuild = median(Array.from({ length: rebuildRuns }, () => timeOnce(() => (table = RoutingTable.fromChunks(chunks)))));

    const valueKeys: ShardKey[] = Array.from({ length: 100_000 }, () => [Math.floor(random() * n * KEY_STEP)]);
    const byteKeys = valueKeys.map((k) => encodeKey(k));
    benchLookups(table, valueKeys, 20, 10_000); // warm-up
    const lookupValues = benchLookups(table, valueKeys, 50, 10_000);
    const lookupBytes = benchLookups(table, byteKeys, 50, 10_000);

    const cv = table.collectionVersion;
    const oneChange = Array.from({ length: 200 }, () => manyMoves(chunks, cv, 1, random));
    for (const change of oneChange.slice(0, 50)) table.applyChanges(change); // warm-up
    const incremental1 = median(oneChange.slice(50).map((change) => timeOnce(() => table.applyChanges(change))));
    const thousand = Array.from({ length: 12 }, () => manyMoves(chunks, cv, 1000, random));
    table.applyChanges(thousand[0] as Chunk[]);
    const incremental1000 = median(thousand.slice(1).map((change) => timeOnce(() => table.applyChanges(change))));

    rows.push([
      n.toLocaleString('en-US'),
      fmtNs(lookupValues),
      fmtNs(lookupBytes),
      fmtNs(incremental1),
      fmtNs(incremental1000),
      fmtNs(rebuild),
      `${Math.round(rebuild / incremental1).toLocaleString('en-US')}x`,
      `${Math.round((h2 - h1) / n)} B`,
      `${Math.round((h1 - h0) / n)} B`,
    ]);
  }
  const header = ['chunks', 'chunkFor (values)', 'chunkFor (bytes)', 'applyChanges 1', 'applyChanges 1000', 'full rebuild', 'rebuild / incr(1)', 'table heap/chunk', 'chunk data/chunk'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] as string).length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padStart(widths[i] as number)).join('  ');
  console.log(line(header));
  for (const row of rows) console.log(line(row));
  console.log('chunkFor: median over batches of 10,000 random keys; applyChanges 1 / 1000: 1 / 1,000 distinct random chunks moved');
  console.log('(median of 150 / 11 runs); full rebuild: RoutingTable.fromChunks on all chunks, validation included;');
  console.log('table heap/chunk: memory (JS heap + array buffers) the table adds beyond the chunk objects; chunk data/chunk: the chunk objects themselves.');
}

run();
