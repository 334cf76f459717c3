import { mkdtempSync, chmodSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent } from 'undici';
import { percentile } from '@tessera/core';
import type { LocalCluster } from '../tools/cluster/local-cluster.js';
import { planBenchCluster, postJson } from './crud-fixture.js';

/**
 * bench:history — what keeping document versions for snapshot reads costs, and what reading the
 * past costs. Two local clusters of real processes (3 shards, 1 router, each with its own
 * embedded Postgres) run side by side: one keeps history (minSnapshotHistoryWindowInSeconds 300,
 * the default), one keeps none (0). The same load goes to each in turns, slice after slice, so
 * that drift on this machine falls on both alike:
 *
 * - single inserts and batches of 100 (documents of about 200 bytes, 16 loops): an insert
 *   replaces no version, so what history costs it is the stamp each row carries, in both modes;
 * - single updates of existing documents (16 loops): each keeps the version it replaces.
 *
 * Then, on the cluster with history, 1,000 documents over the 3 shards, a time recorded, 60 s
 * of updates to them, and the same find of all 1,000 at the recorded time and at the present,
 * in turns: p50 and p99 of each. Prints each figure as a ratio, history on against off, and the
 * snapshot read's p50 against the present read's.
 */
const SLICES = Number(process.env.BENCH_SLICES ?? 4);
const SLICE_SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONCURRENCY = 16;
const BACK_SECONDS = Number(process.env.BENCH_SNAPSHOT_BACK_SECONDS ?? 60);
const READS = Number(process.env.BENCH_READS ?? 60);
const SNAPSHOT_DOCS = 1_000;
const payload = 'p'.repeat(160);

interface Side {
  name: 'history on' | 'history off';
  cluster: LocalCluster;
  router: string;
  /** Next key to insert, per collection. */
  next: Map<string, number>;
}

type Ts = { $timestamp: { t: number; i: number } };

const dir = mkdtempSync(join(tmpdir(), 'tessera-bench-history-'));
chmodSync(dir, 0o755);
const agent = new Agent({ connections: CONCURRENCY * 2 });
const sides: Side[] = [];

try {
  for (const [name, window] of [
    ['history on', '300'],
    ['history off', '0'],
  ] as const) {
    const cluster = await planBenchCluster(join(dir, name.replace(' ', '-')), { TESSERA_MIN_SNAPSHOT_HISTORY_WINDOW_SECS: window });
    console.log(`bench:history — starting the cluster with ${name}`);
    await cluster.start();
    const config = cluster.configClient();
    for (let i = 0; i < 100 && !(await config.leader()).self.isLeader; i++) await new Promise((r) => setTimeout(r, 100));
    for (const coll of ['singles', 'batches', 'updated', 'snapshot'])
      await config.shardCollection({ ns: `hist.${coll}`, key: coll === 'snapshot' ? { k: 1 } : { k: 'hashed' } });
    sides.push({ name, cluster, router: cluster.routerUrls[0]!, next: new Map() });
  }

  const rates = new Map<string, Map<string, number[]>>();
  const record = (what: string, side: Side, rate: number) => {
    const bySide = rates.get(what) ?? new Map<string, number[]>();
    rates.set(what, bySide);
    bySide.set(side.name, [...(bySide.get(side.name) ?? []), rate]);
  };

  for (const side of sides) await insert(side, 'updated', 10_000, 1_000);
  const loads: Array<[string, (side: Side) => Promise<number>]> = [
    ['insert, batches of 1', (side) => insert(side, 'singles', 1)],
    ['insert, batches of 100', (side) => insert(side, 'batches', 100)],
    ['update, one document', (side) => update(side)],
  ];
  for (const [what, load] of loads) {
    // Unmeasured first turn on each side: warms both clusters' code for this load.
    for (const side of sides) await loop(() => load(side), SLICE_SECONDS);
    for (let slice = 0; slice < SLICES; slice++) {
      const order = slice % 2 === 0 ? sides : [...sides].reverse();
      for (const side of order) record(what, side, await loop(() => load(side), SLICE_SECONDS));
    }
  }

  console.log('\nbench:history — writes, documents per second (history on : off, slice by slice)');
  for (const [what, bySide] of rates) {
    const on = bySide.get('history on')!;
    const off = bySide.get('history off')!;
    const ratio = sum(on) / sum(off);
    console.log(
      `  ${what.padEnd(24)} on ${fmt(mean(on))}/s  off ${fmt(mean(off))}/s  ratio ${ratio.toFixed(2)}  slices ${on.map((r, i) => (r / off[i]!).toFixed(2)).join(' ')}`,
    );
  }

  await snapshotReads(sides[0]!);
} finally {
  for (const side of sides) await side.cluster.stop();
  await agent.close();
  rmSync(dir, { recursive: true, force: true });
}

/** Inserts `count` documents (of `batch` per request) into `hist.<coll>`, or one batch when count is omitted; answers documents written. */
async function insert(side: Side, coll: string, batch: number, count = batch): Promise<number> {
  for (let done = 0; done < count; done += batch) {
    const first = side.next.get(coll) ?? 0;
    side.next.set(coll, first + batch);
    const documents = Array.from({ length: batch }, (_, i) => ({ k: first + i, n: 0, payload }));
    const answer = await postJson<{ insertedCount?: number }>(agent, `${side.router}/v1/hist/${coll}/insert`, {
      documents,
      ordered: false,
    });
    if (answer.insertedCount !== batch) throw new Error(`insert failed: ${JSON.stringify(answer).slice(0, 300)}`);
  }
  return count;
}

/** Updates one random document of `hist.updated`; answers 1. */
async function update(side: Side): Promise<number> {
  const k = Math.floor(Math.random() * 10_000);
  const answer = await postJson<{ modifiedCount?: number }>(agent, `${side.router}/v1/hist/updated/update`, {
    updates: [{ q: { k }, u: { $inc: { n: 1 } } }],
  });
  if (answer.modifiedCount !== 1) throw new Error(`update failed: ${JSON.stringify(answer).slice(0, 300)}`);
  return 1;
}

/** Runs `work` from CONCURRENCY loops for `seconds`; answers documents per second. */
async function loop(work: () => Promise<number>, seconds: number): Promise<number> {
  const end = Date.now() + seconds * 1000;
  const started = process.hrtime.bigint();
  let documents = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (Date.now() < end) {
        // Not `documents += await work()`: that reads `documents` before the await, and loses the other loops' counts.
        const written = await work();
        documents += written;
      }
    }),
  );
  return documents / (Number(process.hrtime.bigint() - started) / 1e9);
}

/**
 * 1,000 documents over the 3 shards, a recorded time, BACK_SECONDS of updates to them, then the
 * find of all 1,000 at the recorded time and at the present, in turns.
 */
async function snapshotReads(side: Side): Promise<void> {
  const config = side.cluster.configClient();
  await config.moveRange({
    ns: 'hist.snapshot',
    min: { k: Math.floor(SNAPSHOT_DOCS / 3) },
    max: { k: Math.floor((2 * SNAPSHOT_DOCS) / 3) },
    toShard: 'shard1',
  });
  await config.moveRange({
    ns: 'hist.snapshot',
    min: { k: Math.floor((2 * SNAPSHOT_DOCS) / 3) },
    max: { k: SNAPSHOT_DOCS },
    toShard: 'shard2',
  });
  const written = await postJson<{ insertedCount?: number; operationTime?: Ts; $clusterTime?: unknown }>(
    agent,
    `${side.router}/v1/hist/snapshot/insert`,
    { documents: Array.from({ length: SNAPSHOT_DOCS }, (_, k) => ({ k, n: 0, payload })), ordered: false },
  );
  if (written.insertedCount !== SNAPSHOT_DOCS || written.operationTime === undefined) throw new Error('snapshot documents not written');
  console.log(`\nbench:history — ${SNAPSHOT_DOCS} documents on 3 shards; updating them for ${BACK_SECONDS} s`);
  let updates = 0;
  const end = Date.now() + BACK_SECONDS * 1000;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (Date.now() < end) {
        const k = Math.floor(Math.random() * SNAPSHOT_DOCS);
        await postJson(agent, `${side.router}/v1/hist/snapshot/update`, { updates: [{ q: { k }, u: { $inc: { n: 1 } } }] });
        updates++;
      }
    }),
  );
  const read = async (readConcern?: unknown): Promise<number> => {
    const started = process.hrtime.bigint();
    let answer = await postJson<{ cursor: { id: string; firstBatch: unknown[] } }>(agent, `${side.router}/v1/hist/snapshot/find`, {
      filter: {},
      batchSize: SNAPSHOT_DOCS,
      ...(readConcern ? { readConcern } : {}),
    });
    let documents = answer.cursor.firstBatch.length;
    while (answer.cursor.id !== '0') {
      const next = await postJson<{ cursor: { id: string; nextBatch: unknown[] } }>(
        agent,
        `${side.router}/v1/cursors/${answer.cursor.id}/next`,
        {
          batchSize: SNAPSHOT_DOCS,
        },
      );
      documents += next.cursor.nextBatch.length;
      answer = { cursor: { id: next.cursor.id, firstBatch: [] } };
    }
    if (documents !== SNAPSHOT_DOCS) throw new Error(`a read found ${documents} documents`);
    return Number(process.hrtime.bigint() - started) / 1e6;
  };
  const past = { level: 'snapshot', atClusterTime: written.operationTime };
  for (let i = 0; i < 10; i++) {
    await read(past);
    await read();
  }
  const pastMs: number[] = [];
  const presentMs: number[] = [];
  for (let i = 0; i < READS; i++) {
    pastMs.push(await read(past));
    presentMs.push(await read());
  }
  const back = Math.floor(Date.now() / 1000) - written.operationTime.$timestamp.t;
  const [p, q] = [pastMs.sort((a, b) => a - b), presentMs.sort((a, b) => a - b)];
  console.log(`  ${updates} updates to them meanwhile; reads of all ${SNAPSHOT_DOCS}, ${READS} each way, in turns`);
  console.log(`  at ${back} s back: p50 ${percentile(p, 50).toFixed(1)} ms  p99 ${percentile(p, 99).toFixed(1)} ms`);
  console.log(`  at the present:  p50 ${percentile(q, 50).toFixed(1)} ms  p99 ${percentile(q, 99).toFixed(1)} ms`);
  console.log(`  snapshot p50 : present p50 = ${(percentile(p, 50) / percentile(q, 50)).toFixed(2)} (goal: at most 2)`);
}

function sum(values: readonly number[]): number {
  return values.reduce((a, b) => a + b, 0);
}
function mean(values: readonly number[]): number {
  return sum(values) / values.length;
}
function fmt(rate: number): string {
  return Math.round(rate).toLocaleString('en-US');
}
