import { type ChildProcess, fork } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ObjectId } from 'bson';
import pg from 'pg';
import { Agent, request } from 'undici';
import { encodeKey, extractShardKey, parseShardKeyPattern, toExtendedJsonObject } from '@tessera/core';
import { ShardClient, WireAgent } from '@tessera/protocol';
import { CatalogCache } from '@tessera/routing';
import { LocalCluster, freePort } from '../tools/cluster/local-cluster.js';
import { BackgroundWork } from './background-work.js';
import { percentile } from './percentile.js';
import { ProcessCpu, machineBusyMillis } from './process-cpu.js';
import { isSteady } from './steady-state.js';

/**
 * bench:crud — on a local cluster of real processes (3 shards, 1 router, one embedded Postgres
 * with its default durable settings): inserts per second through the router for batches of 1
 * and of 100 documents of about 200 bytes, against raw `pg` inserts of the same rows into one
 * database of the same server with the same batch sizes and concurrency (the physical limit
 * here); then point reads by shard key, p50/p99, through the router and straight from a shard.
 * Everything, load generator included, shares this machine's cores, so each run also prints the
 * CPU time every process spent per document or read (from /proc, Linux only): where the cores went.
 *
 * The floor runs the same load through the cluster's shape with nothing in it: a relay process
 * where the router is and three store processes where the shards are, bare Fastify and undici,
 * each store writing its documents with the raw baseline's statement (see hop-floor-server.ts).
 * Its ratio is what two HTTP hops on Node leave of the raw rate on this machine, before any
 * routing, versioning, validation or storage work. The router reaches its shards over the
 * internal wire, which costs less than an HTTP hop, so the floor is a reference, not a bound.
 */
const SECONDS = Number(process.env.BENCH_SECONDS ?? 6);
/**
 * Warm-up windows, of throughput and of point reads alike. Reads come one at a time, a few
 * hundred a second, so their code reaches the JIT's optimizing tier slowly (tens of seconds):
 * shorter windows are noisy enough to look steady while the p50 is still falling.
 */
const WINDOW_SECONDS = 3;
/**
 * Reads warm up at least this long, steady or not: their code warms slowly (see WINDOW_SECONDS),
 * and three noisy windows can pass for steady early, with the p50 still well above its warm
 * value (docs/benchmarks.md).
 */
const READ_WARMUP_MIN_SECONDS = 30;
/**
 * Insert runs warm up at least this long too. The first run starts on a fresh cluster, and its
 * rate climbs for about 30 s, with dips that can pass for steady before that (docs/benchmarks.md).
 */
const INSERT_WARMUP_MIN_SECONDS = 30;
/** Each run first goes unmeasured until its figure stops climbing (see steady-state.ts), for this long at the most. */
const WARMUP_MAX_SECONDS = Number(process.env.BENCH_WARMUP_MAX_SECONDS ?? 90);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
const READS = Number(process.env.BENCH_READS ?? 2_000);
/** The measured reads of each way come in this many slices, the ways taking turns (see the reads). */
const READ_SLICES = 4;
const repoRoot = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
const FLOOR_STORES = 3;
const payload = 'x'.repeat(150);
const documentFor = (k: number) => ({ k, n: k, payload });
/** The benchmarked collections' shard key; the raw baseline and the floor's stores encode the same key. */
const SHARD_KEY = { k: 'hashed' } as const;

/** Before the reads, the machine's busy CPU must fall under this many ms per second (idle, with the cluster up, it spends 100-150)... */
const SETTLE_QUIET_MS_PER_SECOND = 200;
/** ...over a window this long, waiting this long at the most. */
const SETTLE_WINDOW_SECONDS = 2;
const SETTLE_MAX_SECONDS = Number(process.env.BENCH_SETTLE_MAX_SECONDS ?? 90);

/**
 * Waits until the whole machine (kernel threads too: the write-back of what the inserts left)
 * is busy for less than `SETTLE_QUIET_MS_PER_SECOND` over a window, or `SETTLE_MAX_SECONDS`
 * have passed; answers how long that took and the rate of the last window.
 */
async function settle(): Promise<{ seconds: number; rate: number; quiet: boolean }> {
  const started = performance.now();
  for (;;) {
    const before = machineBusyMillis() ?? 0;
    await new Promise((resolve) => setTimeout(resolve, SETTLE_WINDOW_SECONDS * 1000));
    const rate = ((machineBusyMillis() ?? 0) - before) / SETTLE_WINDOW_SECONDS;
    const seconds = (performance.now() - started) / 1000;
    if (rate < SETTLE_QUIET_MS_PER_SECOND || seconds >= SETTLE_MAX_SECONDS)
      return { seconds, rate, quiet: rate < SETTLE_QUIET_MS_PER_SECOND };
  }
}

/** How a run's warm-up went: its length and each window's figure, printed with the results. */
interface Warmup {
  seconds: number;
  windows: string[];
  steady: boolean;
}
const warmups: Array<{ what: string; warmup: Warmup }> = [];

/** Records the warm-up of `what`, `seconds` long: its windows' `scores` (higher is better), printed as `windows`. */
function recordWarmup(what: string, seconds: number, scores: readonly number[], windows: string[]): void {
  warmups.push({ what, warmup: { seconds, windows, steady: isSteady(scores) } });
}

/**
 * Runs `insert` from `CONCURRENCY` loops in windows of `WINDOW_SECONDS` until the rate is steady
 * and `INSERT_WARMUP_MIN_SECONDS` have passed (or `WARMUP_MAX_SECONDS`), then awaits `begin`
 * (the load goes on meanwhile) and measures for `SECONDS`: answers the documents written per
 * second, and how many, from the inserts that completed after `begin`.
 */
async function throughput(
  what: string,
  batch: number,
  insert: (first: number, count: number) => Promise<void>,
  begin: () => Promise<void>,
): Promise<{ rate: number; documents: number }> {
  let next = 0;
  let completed = 0;
  let measuredFrom: number | undefined;
  let stopAt = Infinity;
  const started = performance.now();
  const rates: number[] = [];
  const loops = Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < stopAt) {
        const first = next;
        next += batch;
        await insert(first, batch);
        completed += batch;
      }
    }),
  );
  while (measuredFrom === undefined) {
    const windowStart = performance.now();
    const before = completed;
    await new Promise((resolve) => setTimeout(resolve, WINDOW_SECONDS * 1000));
    rates.push((completed - before) / ((performance.now() - windowStart) / 1000));
    const elapsed = performance.now() - started;
    if ((isSteady(rates) && elapsed >= INSERT_WARMUP_MIN_SECONDS * 1000) || elapsed >= WARMUP_MAX_SECONDS * 1000) {
      recordWarmup(
        what,
        elapsed / 1000,
        rates,
        rates.map((r) => r.toFixed(0)),
      );
      await begin();
      completed = 0;
      measuredFrom = performance.now();
      stopAt = measuredFrom + SECONDS * 1000;
    }
  }
  await loops;
  return { rate: completed / ((performance.now() - measuredFrom) / 1000), documents: completed };
}

const dir = mkdtempSync(join(tmpdir(), 'tessera-bench-crud-'));
chmodSync(dir, 0o755);
const agent = new Agent({ connections: CONCURRENCY * 2 });
/** The reads straight from a shard travel as the router's do, over the internal wire. */
let wire: WireAgent | undefined;
const floorProcesses: ChildProcess[] = [];

/** Starts one hop-floor server process (see hop-floor-server.ts); answers its URL and pid. */
async function startFloorServer(role: 'store' | 'relay', target: string): Promise<{ url: string; pid: number }> {
  const port = await freePort();
  const child = fork(fileURLToPath(new URL('./hop-floor-server.js', import.meta.url)), [role, String(port), target], { stdio: 'inherit' });
  floorProcesses.push(child);
  await new Promise<void>((resolve, reject) => {
    child.once('message', () => resolve());
    child.once('exit', (code) => reject(new Error(`hop-floor ${role} exited with ${code}`)));
  });
  return { url: `http://127.0.0.1:${port}`, pid: child.pid! };
}

/** POSTs a JSON body and answers the JSON reply. */
async function postJson<T>(url: string, body: unknown): Promise<T> {
  const response = await request(url, {
    dispatcher: agent,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return (await response.body.json()) as T;
}
const cluster = new LocalCluster({
  rootDir: dir,
  distDir: join(repoRoot, 'dist'),
  shards: 3,
  routers: 1,
  pgPort: await freePort(),
  fresh: true,
  ports: { config: await freePort(), router: await freePort(), shard: [await freePort(), await freePort(), await freePort()] },
  databasePrefix: 'bench',
  env: { TESSERA_LOG_LEVEL: 'warn' },
  onProgress: (message) => console.log(`  ${message}`),
});

try {
  console.log('bench:crud — starting a local cluster (3 shards, 1 router)');
  await cluster.start();
  const config = cluster.configClient();
  for (let i = 0; i < 50 && !(await config.leader()).self.isLeader; i++) await new Promise((r) => setTimeout(r, 100));
  const router = cluster.routerUrls[0]!;
  const results: Array<{ what: string; router: number; floor: number; raw: number; goal: number }> = [];
  const pid = (name: string) => () => [cluster.node(name).process!.pid!];
  const cpu = new ProcessCpu({
    client: () => [process.pid],
    router: pid('router0'),
    shards: () => ['shard0', 'shard1', 'shard2'].map((name) => cluster.node(name).process!.pid!),
    config: pid('config'),
    postgres: ProcessCpu.postgres(join(dir, 'postgres', 'data')),
  });
  const cpuRows: Array<{ what: string; per: string; spent: Map<string, number | undefined>; count: number; meanwhile: string }> = [];
  const background = await BackgroundWork.open(
    cluster.node('shard0').env.TESSERA_DATABASE_URL!,
    cluster.node('config').env.TESSERA_DATABASE_URL!,
  );
  /**
   * Runs `work` and records the CPU each process group spent on it per unit of `count`, and the
   * background work that ran meanwhile, from the moment `work`'s call of `begin` resolves:
   * `begin` first has Postgres take a checkpoint (see BackgroundWork).
   */
  const measured = async <T>(
    what: string,
    per: string,
    work: (begin: () => Promise<void>) => Promise<T>,
    count: (result: T) => number,
    meter: ProcessCpu = cpu,
  ): Promise<T> => {
    let before = meter.snapshot();
    let backgroundBefore = await background.snapshot();
    const result = await work(async () => {
      await background.checkpoint();
      before = meter.snapshot();
      backgroundBefore = await background.snapshot();
    });
    const spent = meter.since(before);
    cpuRows.push({ what, per, spent, count: count(result), meanwhile: await background.since(backgroundBefore) });
    return result;
  };

  // Raw baseline: the same rows, shaped as a shard stores them, in one database of the same server.
  const rawUrl = cluster.node('shard0').env.TESSERA_DATABASE_URL!.replace(/\/[^/]+$/, '/bench_raw');
  const admin = new pg.Client({ connectionString: cluster.node('shard0').env.TESSERA_DATABASE_URL });
  await admin.connect();
  await admin.query('CREATE DATABASE bench_raw');
  await admin.end();
  const raw = new pg.Pool({ connectionString: rawUrl, max: CONCURRENCY });
  // The collections' own key: a hashed key spreads the index inserts over the whole btree, which
  // costs Postgres more per row than a ranged key's appends at its right edge, so a ranged key
  // would not be the same rows.
  const pattern = parseShardKeyPattern(SHARD_KEY);

  // The floor: a relay where the router is and stores where the shards are, over bench_raw.
  const stores = await Promise.all(Array.from({ length: FLOOR_STORES }, () => startFloorServer('store', rawUrl)));
  const relay = await startFloorServer('relay', stores.map((s) => s.url).join(','));
  const floorCpu = new ProcessCpu({
    client: () => [process.pid],
    router: () => [relay.pid],
    shards: () => stores.map((s) => s.pid),
    postgres: ProcessCpu.postgres(join(dir, 'postgres', 'data')),
  });

  for (const batch of [1, 100]) {
    const ns = `bench.docs${batch}`;
    await config.shardCollection({ ns, key: SHARD_KEY });
    /**
     * Measures `insert` from `CONCURRENCY` loops after the warm-up, with the CPU `meter` saw
     * meanwhile. Each run is measured from a checkpoint, so every run starts with its pages clean.
     */
    const insertRun = (what: string, insert: (first: number, count: number) => Promise<void>, meter: ProcessCpu = cpu) => {
      const label = `insert ${what}, batches of ${batch}`;
      return measured(
        label,
        'document',
        (begin) => throughput(label, batch, insert, begin),
        (r) => r.documents,
        meter,
      );
    };
    const viaRouter = await insertRun('via router', async (first, count) => {
      const documents = Array.from({ length: count }, (_, i) => documentFor(first + i));
      const answer = await postJson<{ insertedCount?: number }>(`${router}/v1/bench/docs${batch}/insert`, { documents, ordered: false });
      if (answer.insertedCount !== count) throw new Error(`router insert failed: ${JSON.stringify(answer).slice(0, 300)}`);
    });

    const table = `raw${batch}`;
    await raw.query(`CREATE TABLE ${table} (id bytea PRIMARY KEY, shard_key bytea NOT NULL, doc json NOT NULL, size integer NOT NULL)`);
    await raw.query(`CREATE INDEX ON ${table} (shard_key)`);
    const rawRate = await insertRun('raw pg', async (first, count) => {
      const rows = Array.from({ length: count }, (_, i) => {
        // As the router does for a document without one: an ObjectId `_id`, first.
        const document = { _id: new ObjectId(), ...documentFor(first + i) };
        const text = JSON.stringify(toExtendedJsonObject(document));
        return [Buffer.from(encodeKey([document._id])), Buffer.from(encodeKey(extractShardKey(pattern, document))), text, text.length];
      });
      // The shard's statement: the documents as one JSON array, cut into rows by Postgres.
      await raw.query(
        `INSERT INTO ${table} (id, shard_key, doc, size)
         SELECT * FROM ROWS FROM (unnest($1::bytea[]), unnest($2::bytea[]), json_array_elements($3::json), unnest($4::int[]))`,
        [rows.map((row) => row[0]), rows.map((row) => row[1]), `[${rows.map((row) => row[2]).join(',')}]`, rows.map((row) => row[3])],
      );
    });

    // Its keys start past the other run's, so the two runs' rows never share an id.
    const keyBase = batch === 1 ? 1_000_000_000 : 0;
    const floor = await insertRun(
      'via floor',
      async (first, count) => {
        const documents = Array.from({ length: count }, (_, i) => documentFor(keyBase + first + i));
        const answer = await postJson<{ insertedCount?: number }>(`${relay.url}/insert`, { documents });
        if (answer.insertedCount !== count) throw new Error(`floor insert failed: ${JSON.stringify(answer).slice(0, 300)}`);
      },
      floorCpu,
    );
    results.push({
      what: `insert, batches of ${batch}`,
      router: viaRouter.rate,
      floor: floor.rate,
      raw: rawRate.rate,
      goal: batch === 1 ? 0.3 : 0.5,
    });
  }

  // Point reads by shard key: through the router, and straight from the owning shard, once the
  // work the inserts left behind is over. Autovacuum would visit every loaded table (it looks once
  // a minute, so a quiet machine at the start of the reads did not mean it was done: in one run it
  // doubled the CPU per read of the phase it landed in), so each database is vacuumed here; then
  // a checkpoint writes out the dirty pages, and the settling waits out the kernel's write-back.
  const vacuumStarted = performance.now();
  for (const url of [...['config', 'shard0', 'shard1', 'shard2'].map((name) => cluster.node(name).env.TESSERA_DATABASE_URL!), rawUrl]) {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await client.query('VACUUM (ANALYZE)');
    } finally {
      await client.end();
    }
  }
  const vacuumSeconds = (performance.now() - vacuumStarted) / 1000;
  await raw.query('CHECKPOINT');
  const settled = await settle();
  console.log(
    `  reads start after ${vacuumSeconds.toFixed(0)} s of VACUUM, a checkpoint and ${settled.seconds.toFixed(0)} s of settling: the machine's busy CPU fell to ${settled.rate.toFixed(0)} ms/s${settled.quiet ? '' : ` (NOT quiet: cut at ${SETTLE_MAX_SECONDS} s)`}`,
  );
  const ns = 'bench.docs100';
  const cache = new CatalogCache(config);
  const info = await cache.getCollectionRoutingInfo(ns);
  if (info.kind !== 'sharded') throw new Error('expected a sharded collection');
  wire = new WireAgent({ clusterKey: cluster.clusterKey });
  const shards = new Map(
    (await config.listShards()).map((s) => [s.name, new ShardClient(s.url, { clusterKey: cluster.clusterKey, dispatcher: agent, wire })]),
  );
  const randomKey = () => Math.floor(Math.random() * 10_000);
  const keys = Array.from({ length: READS }, randomKey);
  /** Random keys, for `seconds` from when the first is taken. */
  function* randomKeysFor(seconds: number): Generator<number> {
    const until = performance.now() + seconds * 1000;
    while (performance.now() < until) yield randomKey();
  }
  /** Answers the latency of each read of `ks`, made one after the other. */
  const latenciesOf = async (read: (k: number) => Promise<void>, ks: Iterable<number>): Promise<number[]> => {
    const latencies: number[] = [];
    for (const k of ks) {
      const started = performance.now();
      await read(k);
      latencies.push(performance.now() - started);
    }
    return latencies;
  };
  const reads = [
    {
      what: 'via router',
      meter: cpu,
      read: async (k: number) => {
        const response = await request(`${router}/v1/bench/docs100/find`, {
          dispatcher: agent,
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ filter: { k } }),
        });
        await response.body.text();
      },
    },
    {
      what: 'from the shard',
      meter: cpu,
      read: async (k: number) => {
        const owner = info.table.chunkFor(extractShardKey(info.keyPattern, { k })).shard;
        await shards.get(owner)!.find({ ns, shardVersion: info.table.shardVersion(owner), filter: { k } });
      },
    },
    {
      what: 'via floor',
      meter: floorCpu,
      read: async (k: number) => {
        const answer = await postJson<{ cursor: { firstBatch: unknown[] } }>(`${relay.url}/find`, { filter: { k } });
        if (answer.cursor.firstBatch.length !== 1)
          throw new Error(`floor read of k=${k} found ${answer.cursor.firstBatch.length} documents`);
      },
    },
  ];
  // The three ways warm up taking turns, a window each, until every one is steady and has read for
  // `READ_WARMUP_MIN_SECONDS` (or `WARMUP_MAX_SECONDS` of its own); then they are measured in
  // alternating slices of `keys`, so that none of them gets the minutes right after the inserts
  // and each the same share of whatever the machine does meanwhile. Every way stays warm until it
  // is measured: any Node process here reads slower after a minute idle, and regains its speed
  // only over thousands of requests, so a way warmed up first and then left waiting would be
  // measured cold (the figures are in docs/benchmarks.md).
  const warming = reads.map(() => ({ seconds: 0, p50s: [] as number[], speeds: [] as number[] }));
  const isWarm = (way: (typeof warming)[number]) =>
    (isSteady(way.speeds) && way.seconds >= READ_WARMUP_MIN_SECONDS) || way.seconds >= WARMUP_MAX_SECONDS;
  while (!warming.every(isWarm)) {
    for (const [i, { read }] of reads.entries()) {
      const started = performance.now();
      const window = await latenciesOf(read, randomKeysFor(WINDOW_SECONDS));
      const p50 = percentile(
        window.sort((a, b) => a - b),
        50,
      );
      warming[i]!.seconds += (performance.now() - started) / 1000;
      warming[i]!.p50s.push(p50);
      warming[i]!.speeds.push(1 / p50);
    }
  }
  for (const [i, { what }] of reads.entries()) {
    const { seconds, p50s, speeds } = warming[i]!;
    recordWarmup(
      `point read ${what}`,
      seconds,
      speeds,
      p50s.map((p50) => `${p50.toFixed(2)} ms`),
    );
  }
  const sliceLength = Math.ceil(READS / READ_SLICES);
  const latencies = reads.map(() => [] as number[]);
  const spent = reads.map(() => new Map<string, number | undefined>());
  const backgroundBefore = await background.snapshot();
  for (let from = 0; from < READS; from += sliceLength) {
    for (const [i, { read, meter }] of reads.entries()) {
      const before = meter.snapshot();
      latencies[i]!.push(...(await latenciesOf(read, keys.slice(from, from + sliceLength))));
      for (const [group, ms] of meter.since(before)) spent[i]!.set(group, ms === undefined ? undefined : (spent[i]!.get(group) ?? 0) + ms);
    }
  }
  const meanwhile = await background.since(backgroundBefore);
  for (const [i, { what }] of reads.entries()) {
    cpuRows.push({ what: `point read ${what}`, per: 'read', spent: spent[i]!, count: latencies[i]!.length, meanwhile });
  }
  await raw.end();

  console.log(
    `\nbench:crud — ${CONCURRENCY} concurrent clients, ${SECONDS} s per run once its warm-up is steady, ~200 B documents, hashed shard key over 3 shards\n`,
  );
  console.log(
    `warm-ups (windows of ${WINDOW_SECONDS} s, until none of the last 3 beat the best before by 3%, at least ${INSERT_WARMUP_MIN_SECONDS} s for inserts and ${READ_WARMUP_MIN_SECONDS} s for reads; at most ${WARMUP_MAX_SECONDS} s):`,
  );
  for (const { what, warmup } of warmups) {
    console.log(
      `  ${what}: ${warmup.seconds.toFixed(0)} s${warmup.steady ? '' : ' (NOT steady: cut at the limit)'}: ${warmup.windows.join(', ')}`,
    );
  }
  console.log('');
  console.log('what                        router docs/s   floor docs/s   raw pg docs/s   ratio   floor ratio   goal');
  for (const r of results) {
    const ratio = r.router / r.raw;
    console.log(
      `${r.what.padEnd(27)} ${r.router.toFixed(0).padStart(13)}   ${r.floor.toFixed(0).padStart(12)}   ${r.raw.toFixed(0).padStart(13)}   ${ratio.toFixed(2).padStart(5)}   ${(r.floor / r.raw).toFixed(2).padStart(11)}   >= ${r.goal} ${ratio >= r.goal ? 'met' : 'NOT met'}`,
    );
  }
  for (const [i, { what }] of reads.entries()) {
    const values = latencies[i]!;
    const sorted = [...values].sort((a, b) => a - b);
    const p50 = percentile(sorted, 50);
    const slices = Array.from({ length: Math.ceil(values.length / sliceLength) }, (_, s) =>
      percentile(
        values.slice(s * sliceLength, (s + 1) * sliceLength).sort((a, b) => a - b),
        50,
      ).toFixed(2),
    );
    console.log(
      `point read by shard key ${what.padEnd(14)}: p50 ${p50.toFixed(2)} ms, p99 ${percentile(sorted, 99).toFixed(2)} ms over ${values.length} reads (slices' p50s ${slices.join(', ')})${i === 0 ? ` (goal p50 <= 2 ms: ${p50 <= 2 ? 'met' : 'NOT met'})` : ''}`,
    );
  }
  console.log(
    '\nCPU ms spent per document or read, by process (from /proc; the machine has 2 cores shared by all of them; for the floor, router is the relay and shards the stores):',
  );
  const groups = ['client', 'router', 'shards', 'config', 'postgres'];
  console.log(`${'what'.padEnd(36)}${groups.map((g) => g.padStart(9)).join('')}    total`);
  for (const row of cpuRows) {
    const figures = groups.map((g) => row.spent.get(g));
    const total = figures.reduce<number>((sum, f) => sum + (f ?? 0), 0);
    const cell = (ms: number | undefined) => (ms === undefined ? 'n/a' : (ms / row.count).toFixed(3)).padStart(9);
    console.log(`${`${row.what} (per ${row.per})`.padEnd(36)}${figures.map(cell).join('')}${cell(total)}`);
  }
  console.log('\nbackground work during each measured run (Postgres checkpoints; the cluster changelog but balancer rounds):');
  for (const row of cpuRows) console.log(`  ${row.what}: ${row.meanwhile}`);
  await background.close();
} finally {
  for (const child of floorProcesses) child.kill('SIGTERM');
  await cluster.stop();
  await wire?.close();
  await agent.close();
  rmSync(dir, { recursive: true, force: true });
}
