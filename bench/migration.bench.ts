import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { from as copyFrom, to as copyTo } from 'pg-copy-streams';
import { Agent, request } from 'undici';
import { ConfigClient } from '@tessera/protocol';
import { LocalCluster, freePort } from '../tools/cluster/local-cluster.js';

/**
 * bench:migration — on a local cluster of real processes (2 shards, 1 router, one embedded
 * Postgres with its default durable settings):
 *
 * 1. moves a chunk of 100k documents of ~200 B from one shard to the other and reports MB/s and
 *    documents/s, against the raw copy of the same rows between the two shard databases with
 *    `COPY TO` piped into `COPY FROM` (the physical limit here), as a ratio (goal >= 0.5);
 * 2. under a concurrent insert and update load on the migrating range, moves a chunk back and
 *    forth and reports the critical section's p50/p99 (goal p99 <= 100 ms) and the writes' p99
 *    latency during the migrations against the same load without them;
 * 3. moves the primary of a database holding the same documents in an unsharded collection
 *    (movePrimary's clone) and reports its MB/s against the same raw copy.
 */
const DOCUMENTS = Number(process.env.BENCH_DOCUMENTS ?? 100_000);
const MOVES = Number(process.env.BENCH_MOVES ?? 20);
const WRITERS = Number(process.env.BENCH_WRITERS ?? 8);
const HOT_DOCUMENTS = Number(process.env.BENCH_HOT_DOCUMENTS ?? 5_000);
const repoRoot = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
const payload = 'x'.repeat(165);

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

const dir = mkdtempSync(join(tmpdir(), 'tessera-bench-migration-'));
chmodSync(dir, 0o755);
const agent = new Agent({ connections: 32 });
const cluster = new LocalCluster({
  rootDir: dir,
  distDir: join(repoRoot, 'dist'),
  shards: 2,
  routers: 1,
  pgPort: await freePort(),
  fresh: true,
  ports: { config: await freePort(), router: await freePort(), shard: [await freePort(), await freePort()] },
  databasePrefix: 'bench',
  // bench:crud measures what checking callers costs; this bench measures migrations.
  env: {
    TESSERA_LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn',
    TESSERA_ORPHAN_CLEANUP_DELAY_SECS: '0',
    TESSERA_AUTHORIZATION: 'disabled',
  },
  onProgress: (message) => console.log(`  ${message}`),
});

async function routerCall(path: string, body: unknown): Promise<Record<string, unknown>> {
  const response = await request(`${cluster.routerUrls[0]}${path}`, {
    dispatcher: agent,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const answer = (await response.body.json()) as Record<string, unknown>;
  if (response.statusCode !== 200) throw new Error(`router answered ${response.statusCode}: ${JSON.stringify(answer).slice(0, 300)}`);
  return answer;
}

async function load(ns: string, count: number, first = 0): Promise<void> {
  const [db, coll] = ns.split('.');
  let next = first;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (next < first + count) {
        const start = next;
        next += 1000;
        const documents = Array.from({ length: Math.min(1000, first + count - start) }, (_, i) => ({
          _id: start + i,
          k: start + i,
          payload,
        }));
        await routerCall(`/v1/${db}/${coll}/insert`, { documents, ordered: false });
      }
    }),
  );
}

async function ownerOf(config: ConfigClient, ns: string): Promise<string> {
  return (await config.getChunks({ ns })).chunks[0]!.shard;
}

try {
  console.log('bench:migration — starting a local cluster (2 shards, 1 router)');
  await cluster.start();
  // Migrations outlast the default 10 s request deadline.
  const config = new ConfigClient(cluster.configUrl, { clusterKey: cluster.clusterKey, dispatcher: agent, timeoutMs: 600_000 });
  for (let i = 0; i < 50 && !(await config.leader()).self.isLeader; i++) await new Promise((r) => setTimeout(r, 100));
  const shardUrl = (name: string) => cluster.node(name).env.TESSERA_DATABASE_URL!;

  // 1. Throughput: one chunk of DOCUMENTS documents.
  const ns = 'bench.move';
  await config.shardCollection({ ns, key: { k: 1 } });
  console.log(`  loading ${DOCUMENTS} documents`);
  await load(ns, DOCUMENTS);
  const donor = await ownerOf(config, ns);
  const recipient = donor === 'shard0' ? 'shard1' : 'shard0';
  const started = performance.now();
  const moved = await config.moveRange({ ns, min: { k: { $minKey: 1 } }, toShard: recipient });
  const seconds = (performance.now() - started) / 1000;
  const mbPerSecond = moved.bytesCloned / 1e6 / seconds;

  // The raw copy: the donor's table, COPY TO piped into COPY FROM a new table in the recipient's database.
  const source = new pg.Client({ connectionString: shardUrl(donor) });
  const target = new pg.Client({ connectionString: shardUrl(recipient) });
  await source.connect();
  await target.connect();
  const uuid = (await source.query<{ uuid: string }>('SELECT uuid FROM collections WHERE ns = $1', [ns])).rows[0]!.uuid;
  const table = `c_${uuid.replaceAll('-', '')}`;
  const bytes = Number((await source.query<{ b: string }>(`SELECT sum(size) AS b FROM ${table}`)).rows[0]!.b);
  await target.query('CREATE TABLE raw_copy (id bytea PRIMARY KEY, shard_key bytea NOT NULL, doc json NOT NULL, size integer NOT NULL)');
  await target.query('CREATE INDEX ON raw_copy (shard_key)');
  const rawStarted = performance.now();
  await pipeline(
    source.query(copyTo(`COPY ${table} (id, shard_key, doc, size) TO STDOUT`)),
    target.query(copyFrom('COPY raw_copy FROM STDIN')),
  );
  const rawSeconds = (performance.now() - rawStarted) / 1000;
  const rawMbPerSecond = bytes / 1e6 / rawSeconds;
  await target.query('DROP TABLE raw_copy');

  // 3. movePrimary: the same documents in an unsharded collection, cloned whole to the other shard.
  await config.enableSharding({ db: 'benchplain', primaryShard: donor });
  await load('benchplain.move', DOCUMENTS);
  const primaryStarted = performance.now();
  await config.movePrimary({ db: 'benchplain', to: recipient });
  const primarySeconds = (performance.now() - primaryStarted) / 1000;
  const plainUuid = (await target.query<{ uuid: string }>("SELECT uuid FROM collections WHERE ns = 'benchplain.move'")).rows[0]!.uuid;
  const plainBytes = Number(
    (await target.query<{ b: string }>(`SELECT sum(size) AS b FROM c_${plainUuid.replaceAll('-', '')}`)).rows[0]!.b,
  );
  const primaryMbPerSecond = plainBytes / 1e6 / primarySeconds;
  await source.end();
  await target.end();

  // 2. The critical section under load: a chunk moved back and forth while writers insert into
  // and update it; each move waits for its range deletion, so the next recipient holds no orphans.
  const hot = 'bench.hot';
  await config.shardCollection({ ns: hot, key: { k: 1 } });
  await load(hot, HOT_DOCUMENTS);
  let stop = false;
  let nextId = 1_000_000;
  const latencies: number[] = [];
  const failed: unknown[] = [];
  const writers = () =>
    Array.from({ length: WRITERS }, async () => {
      while (!stop) {
        const t = performance.now();
        try {
          if (Math.random() < 0.5) {
            const id = nextId++;
            await routerCall('/v1/bench/hot/insert', { documents: [{ _id: id, k: id % HOT_DOCUMENTS, payload }] });
          } else {
            const k = Math.floor(Math.random() * HOT_DOCUMENTS);
            await routerCall('/v1/bench/hot/update', { updates: [{ q: { k, _id: k }, u: { $inc: { n: 1 } } }] });
          }
        } catch (error) {
          failed.push(error);
          stop = true;
          break;
        }
        latencies.push(performance.now() - t);
      }
    });
  const window = async (work: () => Promise<void>) => {
    stop = false;
    latencies.length = 0;
    const running = writers();
    await work();
    stop = true;
    await Promise.all(running);
    return [...latencies];
  };
  console.log('  measuring writes without migrations');
  const quiet = await window(() => new Promise((resolve) => setTimeout(resolve, 5_000)));
  console.log(`  moving the hot chunk ${MOVES} times under load`);
  const sections: number[] = [];
  const busy = await window(async () => {
    for (let i = 0; i < MOVES; i++) {
      const from = await ownerOf(config, hot);
      const result = await config.moveRange({
        ns: hot,
        min: { k: { $minKey: 1 } },
        toShard: from === 'shard0' ? 'shard1' : 'shard0',
        waitForDelete: true,
      });
      sections.push(result.criticalSectionMs);
    }
  });

  if (failed.length > 0) throw new Error(`${failed.length} writes failed during the bench; the first: ${String(failed[0])}`);
  console.log(`\nbench:migration — ${DOCUMENTS} documents of ~200 B; ${WRITERS} writers during ${MOVES} moves\n`);
  const ratio = mbPerSecond / rawMbPerSecond;
  console.log(
    `moveRange: ${mbPerSecond.toFixed(1)} MB/s, ${(moved.documentsCloned / seconds).toFixed(0)} documents/s (${moved.documentsCloned} documents, ${(moved.bytesCloned / 1e6).toFixed(1)} MB in ${seconds.toFixed(2)} s)`,
  );
  const steps = moved.phases.map(
    (p, i) => `${p.phase} ${i + 1 < moved.phases.length ? Date.parse(moved.phases[i + 1]!.at) - Date.parse(p.at) : 0} ms`,
  );
  console.log(`  phases: ${steps.join(', ')}`);
  console.log(`raw COPY TO | COPY FROM between the shard databases: ${rawMbPerSecond.toFixed(1)} MB/s (${rawSeconds.toFixed(2)} s)`);
  console.log(`ratio ${ratio.toFixed(2)} (goal >= 0.5: ${ratio >= 0.5 ? 'met' : 'NOT met'})`);
  console.log(
    `movePrimary: ${primaryMbPerSecond.toFixed(1)} MB/s, ${(DOCUMENTS / primarySeconds).toFixed(0)} documents/s (${(plainBytes / 1e6).toFixed(1)} MB in ${primarySeconds.toFixed(2)} s, all six phases); ratio to raw ${(primaryMbPerSecond / rawMbPerSecond).toFixed(2)}`,
  );
  const p99 = percentile(sections, 99);
  console.log(
    `critical section under load: p50 ${percentile(sections, 50).toFixed(1)} ms, p99 ${p99.toFixed(1)} ms over ${sections.length} moves (goal p99 <= 100 ms: ${p99 <= 100 ? 'met' : 'NOT met'})`,
  );
  console.log(
    `write latency p99: ${percentile(busy, 99).toFixed(1)} ms during migrations (${busy.length} writes) vs ${percentile(quiet, 99).toFixed(1)} ms without (${quiet.length} writes); ratio ${(percentile(busy, 99) / percentile(quiet, 99)).toFixed(2)}`,
  );
} catch (error) {
  // Printed before the cluster stops: stopping it can fail in ways that would hide this error.
  console.error('bench:migration failed:', error);
  process.exitCode = 1;
} finally {
  await cluster.stop();
  await agent.close();
  if (process.env.BENCH_KEEP === '1') console.log(`kept ${dir}`);
  else rmSync(dir, { recursive: true, force: true });
}
