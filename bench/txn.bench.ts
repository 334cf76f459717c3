import { randomUUID } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { Agent } from 'undici';
import { percentile } from '@tessera/core';
import { planBenchCluster, postJson } from './crud-fixture.js';

/**
 * bench:txn — what cross-shard transactions cost, and how fast their faults are over. One local
 * cluster of real processes (3 shards, 1 router, one embedded Postgres); accounts `{ _id, n }`
 * range-sharded, 0-999 on shard0 and 1000-1999 on shard1. In turns, slice after slice, from
 * CONCURRENCY loops:
 *
 * - 2-shard transfers through the router: a transaction of two `$inc` updates, one account on
 *   each shard, and commitTransaction (two-phase commit);
 * - the same transfers done raw on the two shards' databases, in the same process: BEGIN, one
 *   UPDATE on each, PREPARE TRANSACTION on both, COMMIT PREPARED on both;
 * - the transfer's two `$inc` updates without a transaction: what the CRUD path alone costs, the
 *   ceiling of any commit protocol over it;
 * - single-shard transactions (one `$inc` and commit) against single-shard writes (one `$inc`).
 *
 * Throughput and p50/p99 latency of each, and each Tessera figure as a ratio against its
 * baseline. Then: the time from a kill -9 of shard0 (the coordinator of half the transfers)
 * under the transfer load until no prepared transaction is left on any shard, the shard being
 * restarted at once (BENCH_KILLS times); and the time a cross-shard wait cycle (two
 * transactions inserting the same two keys in opposite orders on two shards) takes to be broken,
 * with what each side was answered (wait-die: the older commits, the younger is refused).
 */
const SLICES = Number(process.env.BENCH_SLICES ?? 4);
const SLICE_SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
const KILLS = Number(process.env.BENCH_KILLS ?? 5);
const CYCLES = Number(process.env.BENCH_CYCLES ?? 20);
const ACCOUNTS_PER_SHARD = 1_000;
const NS = 'bench.accounts';

const dir = mkdtempSync(join(tmpdir(), 'tessera-bench-txn-'));
chmodSync(dir, 0o755);
const agent = new Agent({ connections: CONCURRENCY * 2 });
const cluster = await planBenchCluster(join(dir, 'cluster'));
const pools: pg.Pool[] = [];

interface Sample {
  count: number;
  /** Attempts that ended in an error (a conflict or an abort): not counted. */
  failed: number;
  firstError?: string;
  latencies: number[];
  seconds: number;
}

try {
  console.log('bench:txn — starting the cluster');
  await cluster.start();
  const config = cluster.configClient();
  for (let i = 0; i < 100 && !(await config.leader()).self.isLeader; i++) await new Promise((r) => setTimeout(r, 100));
  await config.updateSettings({ balancer: { mode: 'off' }, autoSplit: false });
  await config.enableSharding({ db: 'bench', primaryShard: 'shard0' });
  await config.shardCollection({ ns: NS, key: { _id: 1 } });
  await config.moveRange({ ns: NS, min: { _id: ACCOUNTS_PER_SHARD }, max: { _id: { $maxKey: 1 } }, toShard: 'shard1' });
  const router = cluster.routerUrls[0]!;
  const inserted = await postJson<{ insertedCount?: number }>(agent, `${router}/v1/bench/accounts/insert`, {
    documents: Array.from({ length: 2 * ACCOUNTS_PER_SHARD }, (_, _id) => ({ _id, n: 0 })),
    ordered: false,
  });
  if (inserted.insertedCount !== 2 * ACCOUNTS_PER_SHARD) throw new Error(`accounts not inserted: ${JSON.stringify(inserted)}`);
  const raw = await rawAccounts();

  const loads: Array<[string, () => Promise<void>]> = [
    ['2-shard transfer, Tessera', () => transfer(router)],
    ['2-shard transfer, raw 2PC', () => rawTransfer(raw)],
    ['2-shard transfer, no txn', () => plainTransfer(router)],
    ['1-shard transaction', () => singleShardTransaction(router)],
    ['1-shard write', () => singleShardWrite(router)],
  ];
  const samples = new Map<string, Sample[]>();
  // Unmeasured first turn of each: warms the code and the connections.
  for (const [, load] of loads) await loop(load, SLICE_SECONDS);
  for (let slice = 0; slice < SLICES; slice++) {
    const order = slice % 2 === 0 ? loads : [...loads].reverse();
    for (const [what, load] of order) samples.set(what, [...(samples.get(what) ?? []), await loop(load, SLICE_SECONDS)]);
  }
  console.log(`\nbench:txn — ${CONCURRENCY} loops, ${SLICES} slices of ${SLICE_SECONDS} s each, in turns`);
  const rows = [...samples].map(([what, s]) => ({ what, ...summary(s) }));
  for (const row of rows)
    console.log(
      `  ${row.what.padEnd(26)} ${row.rate.toFixed(0).padStart(6)}/s  p50 ${row.p50.toFixed(2)} ms  p99 ${row.p99.toFixed(2)} ms  failed ${row.failed}${row.firstError ? ` (first: ${row.firstError.slice(0, 120)})` : ''}`,
    );
  const rate = (what: string) => rows.find((r) => r.what === what)!.rate;
  console.log(
    `  2-shard transfers, Tessera : raw 2PC      ${(rate('2-shard transfer, Tessera') / rate('2-shard transfer, raw 2PC')).toFixed(2)} (goal >= 0.40)`,
  );
  console.log(
    `  2-shard transfers without a transaction : raw 2PC      ${(rate('2-shard transfer, no txn') / rate('2-shard transfer, raw 2PC')).toFixed(2)} (the CRUD path's ceiling for any commit protocol)`,
  );
  console.log(`  1-shard transaction : 1-shard write      ${(rate('1-shard transaction') / rate('1-shard write')).toFixed(2)}`);

  await recoveries(router);
  await waitCycles(router);
} finally {
  await Promise.all(pools.map((p) => p.end()));
  await cluster.stop();
  await agent.close();
  rmSync(dir, { recursive: true, force: true });
}

/** One statement of a transaction, or its commit; throws on an error answer (the loops count only what committed). */
async function call(router: string, path: string, body: Record<string, unknown>): Promise<Record<string, unknown>> {
  const answer = await postJson<Record<string, unknown>>(agent, `${router}${path}`, body);
  if (answer.ok !== 1) throw Object.assign(new Error(`${path}: ${JSON.stringify(answer).slice(0, 300)}`), { answer });
  return answer;
}

function randomAccount(shard: 0 | 1): number {
  return shard * ACCOUNTS_PER_SHARD + Math.floor(Math.random() * ACCOUNTS_PER_SHARD);
}

/** A transaction's fields, the first statement starting it. */
function transactionOf(): { fields: (first: boolean) => Record<string, unknown> } {
  const lsid = { id: { $uuid: randomUUID() } };
  return { fields: (first) => ({ lsid, txnNumber: 1, autocommit: false, ...(first ? { startTransaction: true } : {}) }) };
}

async function transfer(router: string): Promise<void> {
  const { fields } = transactionOf();
  await call(router, '/v1/bench/accounts/update', { updates: [{ q: { _id: randomAccount(0) }, u: { $inc: { n: -1 } } }], ...fields(true) });
  await call(router, '/v1/bench/accounts/update', { updates: [{ q: { _id: randomAccount(1) }, u: { $inc: { n: 1 } } }], ...fields(false) });
  await call(router, '/v1/admin/commitTransaction', fields(false));
}

/** The transfer's two writes without a transaction: what a transfer costs before any commit protocol. */
async function plainTransfer(router: string): Promise<void> {
  await call(router, '/v1/bench/accounts/update', { updates: [{ q: { _id: randomAccount(0) }, u: { $inc: { n: -1 } } }] });
  await call(router, '/v1/bench/accounts/update', { updates: [{ q: { _id: randomAccount(1) }, u: { $inc: { n: 1 } } }] });
}

async function singleShardTransaction(router: string): Promise<void> {
  const { fields } = transactionOf();
  await call(router, '/v1/bench/accounts/update', { updates: [{ q: { _id: randomAccount(0) }, u: { $inc: { n: 1 } } }], ...fields(true) });
  await call(router, '/v1/admin/commitTransaction', fields(false));
}

async function singleShardWrite(router: string): Promise<void> {
  await call(router, '/v1/bench/accounts/update', { updates: [{ q: { _id: randomAccount(0) }, u: { $inc: { n: 1 } } }] });
}

/** A table of accounts in a database of its own beside each of the first two shards', on the same Postgres server. */
async function rawAccounts(): Promise<[pg.Pool, pg.Pool]> {
  const made: pg.Pool[] = [];
  for (const shard of ['shard0', 'shard1']) {
    const url = new URL(cluster.node(shard).env.TESSERA_DATABASE_URL!);
    const admin = new pg.Pool({ connectionString: url.toString(), max: 1 });
    const name = `bench_raw_${shard}`;
    await admin.query(`DROP DATABASE IF EXISTS ${name}`);
    await admin.query(`CREATE DATABASE ${name}`);
    await admin.end();
    url.pathname = `/${name}`;
    const pool = new pg.Pool({ connectionString: url.toString(), max: CONCURRENCY });
    pools.push(pool);
    await pool.query('CREATE TABLE accounts (id int PRIMARY KEY, n int NOT NULL)');
    await pool.query(`INSERT INTO accounts SELECT g, 0 FROM generate_series(0, ${2 * ACCOUNTS_PER_SHARD - 1}) AS g`);
    made.push(pool);
  }
  return made as [pg.Pool, pg.Pool];
}

/**
 * The same transfer on the two databases: one UPDATE on each, PREPARE TRANSACTION on both, COMMIT
 * PREPARED on both. Global transaction ids are the Postgres server's, shared by both databases:
 * each gets its own. A failure rolls back whatever was begun or prepared.
 */
async function rawTransfer([a, b]: [pg.Pool, pg.Pool]): Promise<void> {
  const gid = `bench_${randomUUID()}`;
  const [ca, cb] = await Promise.all([a.connect(), b.connect()]);
  const prepared: Array<[pg.PoolClient, string]> = [];
  try {
    await ca.query('BEGIN');
    await ca.query('UPDATE accounts SET n = n - 1 WHERE id = $1', [randomAccount(0)]);
    await cb.query('BEGIN');
    await cb.query('UPDATE accounts SET n = n + 1 WHERE id = $1', [randomAccount(1)]);
    await Promise.all(
      (
        [
          [ca, `${gid}_a`],
          [cb, `${gid}_b`],
        ] as const
      ).map(async ([client, id]) => {
        await client.query(`PREPARE TRANSACTION '${id}'`);
        prepared.push([client, id]);
      }),
    );
    await Promise.all(prepared.map(([client, id]) => client.query(`COMMIT PREPARED '${id}'`)));
  } catch (error) {
    await Promise.all([ca, cb].map((client) => client.query('ROLLBACK').catch(() => undefined)));
    await Promise.all(prepared.map(([client, id]) => client.query(`ROLLBACK PREPARED '${id}'`).catch(() => undefined)));
    throw error;
  } finally {
    ca.release();
    cb.release();
  }
}

/** Runs `work` from CONCURRENCY loops for `seconds`: completed calls, their latencies, the seconds taken. */
async function loop(work: () => Promise<void>, seconds: number): Promise<Sample> {
  const end = Date.now() + seconds * 1000;
  const started = process.hrtime.bigint();
  const latencies: number[] = [];
  let count = 0;
  let failed = 0;
  let firstError: string | undefined;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (Date.now() < end) {
        const began = process.hrtime.bigint();
        try {
          await work();
        } catch (error) {
          failed++;
          firstError ??= (error as Error).message;
          continue;
        }
        latencies.push(Number(process.hrtime.bigint() - began) / 1e6);
        count++;
      }
    }),
  );
  return { count, failed, ...(firstError ? { firstError } : {}), latencies, seconds: Number(process.hrtime.bigint() - started) / 1e9 };
}

function summary(samples: readonly Sample[]): { rate: number; p50: number; p99: number; failed: number; firstError: string | undefined } {
  const latencies = samples.flatMap((s) => s.latencies).sort((x, y) => x - y);
  const count = samples.reduce((n, s) => n + s.count, 0);
  const seconds = samples.reduce((n, s) => n + s.seconds, 0);
  const failed = samples.reduce((n, s) => n + s.failed, 0);
  return {
    rate: count / seconds,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    failed,
    firstError: samples.find((s) => s.firstError)?.firstError,
  };
}

/** The prepared transactions on the shards' databases, by global transaction id. */
async function preparedNow(): Promise<Set<string>> {
  const gids = new Set<string>();
  for (const shard of ['shard0', 'shard1', 'shard2']) {
    const pool = new pg.Pool({ connectionString: cluster.node(shard).env.TESSERA_DATABASE_URL, max: 1 });
    try {
      const rows = await pool.query<{ gid: string }>(
        "SELECT gid FROM pg_prepared_xacts WHERE database = current_database() AND gid LIKE 'tessera:%'",
      );
      for (const row of rows.rows) gids.add(row.gid);
    } finally {
      await pool.end();
    }
  }
  return gids;
}

/**
 * Kills shard0 (-9) under the transfer load, once it has committed transfers again since the last
 * kill, restarts it at once, and times the kill until every transaction prepared at the kill (in
 * doubt) is resolved on every shard, BENCH_KILLS times. The figures are over the kills that left
 * transactions in doubt; the others resolve nothing.
 */
async function recoveries(router: string): Promise<void> {
  const times: number[] = [];
  const restarts: number[] = [];
  const inDoubt: number[] = [];
  for (let k = 0; k < KILLS; k++) {
    let running = true;
    let committed = 0;
    const load = Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (running)
          await transfer(router)
            .then(() => committed++)
            .catch(() => undefined);
      }),
    );
    const since = Date.now();
    while (committed < 2 * CONCURRENCY || Date.now() < since + 1_000) await new Promise((r) => setTimeout(r, 20));
    await new Promise((r) => setTimeout(r, Math.random() * 1_000));
    await cluster.kill('shard0');
    const killed = Date.now();
    // Postgres outlives the shard process: what was prepared at the kill is still listed.
    const doubted = await preparedNow();
    inDoubt.push(doubted.size);
    const restart = cluster.restart('shard0').then(() => restarts.push(Date.now() - killed));
    for (;;) {
      const left = await preparedNow();
      if (![...doubted].some((gid) => left.has(gid))) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    if (doubted.size > 0) times.push(Date.now() - killed);
    await restart;
    running = false;
    await load;
  }
  times.sort((x, y) => x - y);
  restarts.sort((x, y) => x - y);
  console.log(
    `\nbench:txn — kill -9 of the coordinator shard under transfers, restarted at once (${KILLS} times; in doubt at the kill: ${inDoubt.join(', ')})`,
  );
  if (times.length > 0)
    console.log(
      `  kill until every in-doubt transaction resolved (${times.length} kills): p50 ${percentile(times, 50)} ms  p99 ${percentile(times, 99)} ms  max ${times[times.length - 1]} ms (goal p99 <= 2000)`,
    );
  if (restarts.length > 0)
    console.log(
      `  the restart until ready:                        p50 ${percentile(restarts, 50)} ms  max ${restarts[restarts.length - 1]} ms`,
    );
}

/**
 * Two transactions insert the same two keys in opposite orders, one key on each of two shards:
 * each waits on the other's uncommitted insert, a cycle no single Postgres sees. Times the second
 * crossing insert until the first of the two is refused, BENCH_CYCLES times.
 */
async function waitCycles(router: string): Promise<void> {
  const times: number[] = [];
  const codes = new Map<string, number>();
  for (let c = 0; c < CYCLES; c++) {
    // A new key on each shard: negative ids are shard0's, 100000 and up shard1's.
    const keys = [-1 - c, 100_000 + c];
    const [a, b] = [transactionOf(), transactionOf()];
    const insert = (t: ReturnType<typeof transactionOf>, _id: number, first: boolean) =>
      postJson<Record<string, unknown>>(agent, `${router}/v1/bench/accounts/insert`, { documents: [{ _id, n: 0 }], ...t.fields(first) });
    await insert(a, keys[0]!, true);
    await insert(b, keys[1]!, true);
    const began = process.hrtime.bigint();
    const answers = await Promise.all([insert(a, keys[1]!, false), insert(b, keys[0]!, false)]);
    times.push(Number(process.hrtime.bigint() - began) / 1e6);
    for (const answer of answers) {
      const code = answer.ok === 1 ? 'ok' : String(answer.codeName);
      codes.set(code, (codes.get(code) ?? 0) + 1);
    }
    for (const t of [a, b]) await call(router, '/v1/admin/abortTransaction', t.fields(false)).catch(() => undefined);
  }
  times.sort((x, y) => x - y);
  console.log(
    `\nbench:txn — a cross-shard wait cycle (${CYCLES} times): both crossing inserts answered in p50 ${percentile(times, 50).toFixed(1)} ms  max ${times[times.length - 1]!.toFixed(1)} ms (goal <= 1000)`,
  );
  console.log(`  answers: ${[...codes].map(([code, n]) => `${code} ${n}`).join(', ')}`);
}
