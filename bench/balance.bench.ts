import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { Agent, request } from 'undici';
import { type BalancerScheduler, percentile } from '@tessera/core';
import { ConfigClient, MigrationClient } from '@tessera/protocol';
import { LocalCluster, freePort } from '../tools/cluster/local-cluster.js';
import { BackgroundWork } from './background-work.js';
import { type MoveDetails, type RoundDetails, describeSizes, mb, printMigrations, printRounds } from './balance-report.js';

/**
 * bench:balance — for each balancer scheduler of BENCH_SCHEDULERS (default `rounds,continuous`),
 * one after the other in this process, on a fresh local cluster of real processes (3 shards, 1
 * spare shard, 1 router, one embedded Postgres with its default durable settings), with the
 * balancer off:
 *
 * 1. inserts BENCH_BALANCE_MB of ~1 KB documents with random keys through the router into a
 *    collection whose chunk size is BENCH_CHUNK_SIZE, all in the range of one shard: the
 *    auto-splitter cuts it into chunks there; then VACUUM (ANALYZE) and a CHECKPOINT on shard0,
 *    so that the writes measured next do not meet the load's aftermath;
 * 2. measures the migration rate of this cluster: BENCH_RATE_MOVES moves of single chunks from
 *    shard0 to shard1 (after one not counted), bytes cloned ÷ the moveRange calls' time, the
 *    fixed costs of a migration included;
 * 3. adds the spare shard as a 4th, turns the balancer on, and times until the collection is
 *    compliant: the end of the first balancer round that finds it so (its `balancer.round` row),
 *    which `balancerCollectionStatus` (exact sizes) then confirms; a round it contradicts (a
 *    round plans on sampled sizes) does not count, and the wait goes on (for 5 such rounds).
 *
 * It prints that time against the lower bound: the bytes the balancer's migrations moved ÷ the
 * rate of step 2 (every migration has one shard in common with the next when one shard holds all
 * the data, so they cannot overlap much), and at the end each scheduler's time against the first's.
 * Goal: ratio <= 1.2 with the default (continuous) scheduler.
 *
 * Under `rounds` a shard takes part in one migration per round, so with one donor a round moves
 * one chunk, and the migration throttle (BENCH_MIGRATIONS_THROTTLING_MS; the cluster's default is MongoDB's
 * balancerMigrationsThrottlingMs, 1 s, counted from the end of a round's migrations, the next
 * round's snapshot and selection included) weighs against migrations of small chunks: the ratio
 * depends on the two; `continuous` has no such throttle. Per balancer round it prints the `balancer.round` row's selection, throttle
 * and migration times, and their sums.
 *
 * From step 2 on, BENCH_WRITERS (2) loops insert ~1 KB documents one at a time into an unsharded
 * collection on shard0, the donor: BENCH_IDLE_SECONDS (5) with nothing migrating first. It prints
 * their p99 while the balancer worked against that idle p99 (goal: <= 2). The migration rate of
 * step 2 is measured under the same load.
 *
 * Donors keep what they moved for the cluster's default orphanCleanupDelaySecs (900 s), so no range
 * deletion runs during the bench: "stored" bytes include those orphans, "owned" ones (the
 * balancer's view) do not.
 */
const MEGABYTES = Number(process.env.BENCH_BALANCE_MB ?? 16);
const CHUNK_SIZE = Number(process.env.BENCH_CHUNK_SIZE ?? 512 * 1024);
const RATE_MOVES = Number(process.env.BENCH_RATE_MOVES ?? 8);
/** The least time between two rounds' migrations; unset: the cluster's default (1 s, MongoDB's balancerMigrationsThrottlingMs). */
const MIGRATIONS_THROTTLING_MS = process.env.BENCH_MIGRATIONS_THROTTLING_MS;
const SCHEDULERS = (process.env.BENCH_SCHEDULERS ?? 'rounds,continuous').split(',') as BalancerScheduler[];
/** Foreground insert loops during steps 2 and 3 (0: none), and how long they run before anything migrates. */
const WRITERS = Number(process.env.BENCH_WRITERS ?? 2);
const IDLE_SECONDS = Number(process.env.BENCH_IDLE_SECONDS ?? 5);
const DOC_BYTES = 1000;
const NS = 'bench.balance';
const repoRoot = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..');

const agent = new Agent({ connections: 16 });
let cluster!: LocalCluster;
let config!: ConfigClient;

/** A fresh cluster in a new directory `dir` (the caller stops it and removes `dir`). */
async function startCluster(dir: string): Promise<LocalCluster> {
  chmodSync(dir, 0o755);
  const started = new LocalCluster({
    rootDir: dir,
    distDir: join(repoRoot, 'dist'),
    shards: 3,
    spareShards: 1,
    routers: 1,
    pgPort: await freePort(),
    fresh: true,
    ports: {
      config: await freePort(),
      router: await freePort(),
      shard: [await freePort(), await freePort(), await freePort(), await freePort()],
    },
    databasePrefix: 'bench',
    env: {
      TESSERA_LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn',
      // bench:crud measures what checking callers costs; this bench measures balancing.
      TESSERA_AUTHORIZATION: 'disabled',
      ...(MIGRATIONS_THROTTLING_MS !== undefined ? { TESSERA_BALANCER_MIGRATIONS_THROTTLING_MS: MIGRATIONS_THROTTLING_MS } : {}),
    },
    onProgress: (message) => console.log(`  ${message}`),
  });
  try {
    await started.start();
  } catch (error) {
    await started.stop();
    throw error;
  }
  return started;
}

async function insert(documents: unknown[]): Promise<void> {
  const response = await request(`${cluster.routerUrls[0]}/v1/bench/balance/insert`, {
    dispatcher: agent,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ documents, ordered: false }),
  });
  const answer = await response.body.text();
  if (response.statusCode !== 200) throw new Error(`router answered ${response.statusCode}: ${answer.slice(0, 300)}`);
}

/** Inserts MEGABYTES of documents with random keys, four batches of 200 in flight, printing progress. */
async function load(): Promise<number> {
  const total = Math.ceil((MEGABYTES * 1e6) / DOC_BYTES);
  const filler = 'x'.repeat(DOC_BYTES - 60);
  let next = 0;
  let reported = 0;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (next < total) {
        const first = next;
        next = Math.min(total, next + 200);
        await insert(Array.from({ length: next - first }, (_, i) => ({ _id: first + i, x: Math.floor(Math.random() * 1e12), filler })));
        if (next - reported >= total / 10) {
          reported = next;
          console.log(`  inserted ${Math.round((100 * next) / total)}%`);
        }
      }
    }),
  );
  return total;
}

/** Bytes of NS each shard stores (orphans waiting for deletion included) and owns (the balancer's view). */
async function shardBytes(): Promise<Map<string, { stored: number; owned: number }>> {
  const shards = await config.listShards();
  const sizes = await Promise.all(
    shards.map(async (s) => {
      const client = new MigrationClient(s.url, { clusterKey: cluster.clusterKey, dispatcher: agent });
      const [stored, owned] = await Promise.all([client.dataSize({ ns: NS }), client.statsForBalancing({ namespaces: [NS] })]);
      return [s.name, { stored: stored.size, owned: owned.stats[0]!.collSize }] as const;
    }),
  );
  return new Map(sizes);
}

/** What one scheduler's run measured. */
interface BalanceRun {
  seconds: number;
  lowerBound: number;
  migrations: number;
  rounds: number;
  /** The foreground inserts' p99 before anything migrated and while the balancer worked (null without writers). */
  idleP99Ms: number | null;
  balancingP99Ms: number | null;
}

/**
 * WRITERS loops inserting one ~1 KB document at a time into the unsharded `bench.foreground`
 * (on shard0, the donor), each latency kept with its end time.
 */
function startForeground(): { stop(): Promise<void>; p99Between(fromMs: number, toMs: number): number | null } {
  const done: Array<{ atMs: number; ms: number }> = [];
  const filler = 'f'.repeat(DOC_BYTES - 40);
  let stopped = false;
  let next = 0;
  const loops = Array.from({ length: WRITERS }, async () => {
    while (!stopped) {
      const started = performance.now();
      await request(`${cluster.routerUrls[0]}/v1/bench/foreground/insert`, {
        dispatcher: agent,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ documents: [{ _id: next++, filler }] }),
      }).then(async (response) => {
        await response.body.text();
        if (response.statusCode !== 200) throw new Error(`foreground insert: HTTP ${response.statusCode}`);
      });
      done.push({ atMs: Date.now(), ms: performance.now() - started });
    }
  });
  return {
    stop: async () => {
      stopped = true;
      await Promise.all(loops);
    },
    p99Between: (fromMs, toMs) => {
      const sorted = done.filter((d) => d.atMs >= fromMs && d.atMs <= toMs).map((d) => d.ms);
      return sorted.length === 0
        ? null
        : percentile(
            sorted.sort((a, b) => a - b),
            99,
          );
    },
  };
}

/**
 * Moves shard0's second chunk to shard1. The chunks are read afresh each time, and the move tried
 * again when a split committed meanwhile: the auto-splitter may still be at work on shard0.
 */
async function moveSecondChunkOfShard0(): Promise<{ bytesCloned: number }> {
  for (let attempt = 1; ; attempt++) {
    const chunk = (await config.getChunks({ ns: NS })).chunks.filter((c) => c.shard === 'shard0')[1]!;
    try {
      return await config.moveRange({ ns: NS, min: { x: chunk.range.min[0] }, toShard: 'shard1' });
    } catch (error) {
      if (attempt >= 5 || (error as { details?: { problem?: string } }).details?.problem !== 'notOwnedChunk') throw error;
    }
  }
}

/** Steps 1 to 3 on the current cluster with `scheduler`. */
async function balanceOnce(scheduler: BalancerScheduler): Promise<BalanceRun> {
  config = new ConfigClient(cluster.configUrl, { clusterKey: cluster.clusterKey, dispatcher: agent, timeoutMs: 600_000 });
  for (let i = 0; i < 50 && !(await config.leader()).self.isLeader; i++) await sleep(100);
  await config.updateSettings({ balancer: { mode: 'off', scheduler } });
  await config.enableSharding({ db: 'bench', primaryShard: 'shard0' });
  await config.shardCollection({ ns: NS, key: { x: 1 } });
  await config.configureCollectionBalancing({ ns: NS, chunkSizeBytes: CHUNK_SIZE });

  // 1. The data, all on shard0.
  const loadStarted = performance.now();
  const documents = await load();
  const chunks = (await config.getChunks({ ns: NS })).chunks;
  console.log(`  ${documents} documents in ${((performance.now() - loadStarted) / 1000).toFixed(1)} s; ${chunks.length} chunks on shard0`);
  // The load leaves Postgres work behind: autovacuum's first pass over the new table (it starts
  // up to a minute later and reads all of it) and the checkpoints writing its pages. Both slow
  // every write while they run; measured through them, the balancing p99 would be the load's
  // aftermath, and the throttle would back off from it. So the data settles first.
  const settleStarted = performance.now();
  const shard0 = new pg.Client({ connectionString: cluster.node('shard0').env.TESSERA_DATABASE_URL });
  await shard0.connect();
  await shard0.query('VACUUM (ANALYZE)');
  await shard0.query('CHECKPOINT');
  await shard0.end();
  console.log(`  VACUUM (ANALYZE) and CHECKPOINT on shard0 in ${((performance.now() - settleStarted) / 1000).toFixed(1)} s`);

  // The foreground writes: IDLE_SECONDS with nothing migrating (the first second left out), then on.
  const foreground = WRITERS > 0 ? startForeground() : undefined;
  const idleFrom = Date.now() + 1000;
  if (foreground !== undefined) await sleep(IDLE_SECONDS * 1000);
  const idleP99Ms = foreground?.p99Between(idleFrom, Date.now()) ?? null;

  // 2. The migration rate: single chunks moved to shard1, after one not counted (a recipient's
  // first migration of a collection also creates its table and indexes). One way only: a chunk
  // moved back would first wait for its range deletion on shard0.
  let rateBytes = 0;
  let rateMs = 0;
  for (let i = 0; i <= RATE_MOVES; i++) {
    const started = performance.now();
    const moved = await moveSecondChunkOfShard0();
    if (i === 0) continue;
    rateMs += performance.now() - started;
    rateBytes += moved.bytesCloned;
  }
  const rate = rateBytes / (rateMs / 1000);
  console.log(
    `  migration rate: ${RATE_MOVES} moves of ${mb(rateBytes / RATE_MOVES)} in ${(rateMs / RATE_MOVES).toFixed(0)} ms each = ${mb(rate)}/s`,
  );

  // 3. A 4th shard, the balancer on, the time until compliant.
  const spare = cluster.shardNodes[3]!;
  await config.addShard({ name: spare.name, url: spare.url });
  const catalog = new pg.Client({ connectionString: cluster.node('config').env.TESSERA_DATABASE_URL });
  await catalog.connect();
  // Postgres ends this connection when a failure stops the cluster first: the failure is what to report.
  catalog.on('error', () => undefined);
  const seqBefore = Number((await catalog.query<{ id: string }>('SELECT coalesce(max(id), 0) AS id FROM changelog')).rows[0]!.id);
  const balancerOn = Date.now();
  await config.updateSettings({ balancer: { mode: 'full' } });
  // Compliance as the balancer finds it: the end of its first round that finds the collection
  // compliant. (Asking balancerCollectionStatus instead makes every shard sum its bytes afresh, a
  // scan as costly as a round's snapshot: polled while the balancer works, it would take the
  // cores the migrations need.) A round plans on sampled sizes, refreshed every 10 s, so near the
  // threshold it may judge otherwise than the exact sums: then balancerCollectionStatus, asked once
  // per such round, has the last word and the wait goes on. Progress meanwhile: the chunks per
  // shard, from the catalog.
  let compliantAt: number | undefined;
  let lastReport = balancerOn;
  // Each progress line says what else ran: checkpoints and migrations write to the one Postgres
  // server (and its WAL) that the foreground writes commit to.
  const background = await BackgroundWork.open(
    cluster.node('shard0').env.TESSERA_DATABASE_URL!,
    cluster.node('config').env.TESSERA_DATABASE_URL!,
  );
  let backgroundBefore = await background.snapshot();
  let searchFrom = seqBefore;
  let contradicted = 0;
  while (compliantAt === undefined) {
    const found = await catalog.query<{ id: string; time: Date }>(
      "SELECT id, time FROM changelog WHERE what = 'balancer.round' AND id > $1 AND details @> $2::jsonb ORDER BY id LIMIT 1",
      [searchFrom, JSON.stringify({ collectionStatus: [{ ns: NS, compliant: true }] })],
    );
    const round = found.rows[0];
    if (round !== undefined && (contradicted >= 5 || (await config.balancerCollectionStatus(NS)).balancerCompliant)) {
      compliantAt = round.time.getTime();
      if (contradicted >= 5) console.log('  taking the sampled verdict after 5 rounds the exact sizes contradicted');
    } else if (round !== undefined) {
      contradicted++;
      console.log(`  ${((round.time.getTime() - balancerOn) / 1000).toFixed(1)} s: a round found it compliant, the exact sizes do not`);
      searchFrom = Number(round.id);
    }
    if (Date.now() - lastReport > 5000) {
      const windowFrom = lastReport;
      lastReport = Date.now();
      const perShard = new Map<string, number>();
      for (const c of (await config.getChunks({ ns: NS })).chunks) perShard.set(c.shard, (perShard.get(c.shard) ?? 0) + 1);
      const counts = [...perShard].sort(([a], [b]) => a.localeCompare(b)).map(([shard, n]) => `${shard} ${n}`);
      const p99 = foreground?.p99Between(windowFrom, lastReport);
      const meanwhile = await background.since(backgroundBefore);
      const vacuuming = await catalog.query<{ n: string }>(
        "SELECT count(*) AS n FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'",
      );
      backgroundBefore = await background.snapshot();
      console.log(
        `  ${((lastReport - balancerOn) / 1000).toFixed(0)} s: chunks ${counts.join(', ')}` +
          `${p99 == null ? '' : `; write p99 ${p99.toFixed(1)} ms`}; meanwhile: ${meanwhile}; autovacuum workers now: ${vacuuming.rows[0]!.n}`,
      );
    }
    if (compliantAt === undefined) await sleep(200);
  }
  await background.close();
  const seconds = (compliantAt - balancerOn) / 1000;
  const balancingP99Ms = foreground?.p99Between(balancerOn, compliantAt) ?? null;
  await foreground?.stop();

  const moves = await catalog.query<{ details: MoveDetails }>(
    "SELECT details FROM changelog WHERE what = 'moveChunk.from' AND id > $1 AND ns = $2",
    [seqBefore, NS],
  );
  const rounds = await catalog.query<{ time: Date; details: RoundDetails }>(
    "SELECT time, details FROM changelog WHERE what = 'balancer.round' AND id > $1 ORDER BY id",
    [seqBefore],
  );
  const throttleChanges = await catalog.query<{ time: Date; details: { state: string; reason: string | null } }>(
    "SELECT time, details FROM changelog WHERE what = 'balancer.throttle' AND id > $1 ORDER BY id",
    [seqBefore],
  );
  await catalog.end();
  const moved = moves.rows.reduce((n, r) => n + r.details.bytesCloned, 0);
  const lowerBound = moved / rate;
  const after = await shardBytes();
  const sizes = [...after.values()].map((b) => b.owned);
  console.log(`\n  balancer: ${moves.rowCount} migrations moving ${mb(moved)} in ${rounds.rowCount} rounds recorded`);
  printRounds(rounds.rows, balancerOn);
  console.log(`  per shard after: ${describeSizes(after)}; owned max ${mb(Math.max(...sizes))}, min ${mb(Math.min(...sizes))}`);
  printMigrations(moves.rows, seconds);
  for (const { time, details } of throttleChanges.rows)
    console.log(
      `  throttle at ${((time.getTime() - balancerOn) / 1000).toFixed(1)} s: ${details.state}${details.reason ? ` (${details.reason})` : ''}`,
    );
  console.log(`  time to balancerCompliant: ${seconds.toFixed(1)} s`);
  if (moved === 0) {
    console.log('  nothing had to move: the collection was compliant when the shard was added (more data or smaller chunks make work)');
  } else {
    console.log(`  lower bound (bytes moved ÷ migration rate): ${lowerBound.toFixed(1)} s`);
    console.log(`  ratio: ${(seconds / lowerBound).toFixed(2)} (goal <= 1.2)`);
  }
  if (idleP99Ms !== null && balancingP99Ms !== null) {
    console.log(
      `  foreground write p99 (${WRITERS} insert loops): idle ${idleP99Ms.toFixed(1)} ms, balancing ${balancingP99Ms.toFixed(1)} ms, ` +
        `${(balancingP99Ms / idleP99Ms).toFixed(2)} x idle (goal <= 2)`,
    );
  }
  return { seconds, lowerBound, migrations: moves.rowCount ?? 0, rounds: rounds.rowCount ?? 0, idleP99Ms, balancingP99Ms };
}

console.log(
  `bench:balance — schedulers ${SCHEDULERS.join(', ')}, each on a fresh local cluster (3 shards + 1 spare, 1 router); ` +
    `${MEGABYTES} MB, chunk size ${CHUNK_SIZE} B, rounds' migration throttle ${MIGRATIONS_THROTTLING_MS ?? 'the default (1000)'} ms`,
);
const results = new Map<BalancerScheduler, BalanceRun>();
try {
  for (const scheduler of SCHEDULERS) {
    console.log(`\n${scheduler}:`);
    const dir = mkdtempSync(join(tmpdir(), 'tessera-bench-balance-'));
    cluster = await startCluster(dir);
    try {
      config = new ConfigClient(cluster.configUrl, { clusterKey: cluster.clusterKey, dispatcher: agent, timeoutMs: 600_000 });
      results.set(scheduler, await balanceOnce(scheduler));
    } finally {
      await cluster.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }
  const first = results.get(SCHEDULERS[0]!)!;
  console.log(`\nsummary (${MEGABYTES} MB, chunk size ${CHUNK_SIZE} B):`);
  for (const [scheduler, r] of results) {
    console.log(
      `  ${scheduler.padEnd(10)} ${r.seconds.toFixed(1)} s to compliant, ${r.migrations} migrations in ${r.rounds} rounds; ` +
        `${(r.seconds / r.lowerBound).toFixed(2)} x its lower bound; ${(r.seconds / first.seconds).toFixed(2)} x ${SCHEDULERS[0]}'s time` +
        (r.idleP99Ms !== null && r.balancingP99Ms !== null
          ? `; write p99 ${(r.balancingP99Ms / r.idleP99Ms).toFixed(2)} x idle (${r.idleP99Ms.toFixed(1)} -> ${r.balancingP99Ms.toFixed(1)} ms)`
          : ''),
    );
  }
} finally {
  await agent.close();
}
