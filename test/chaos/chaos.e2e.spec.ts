import pg from 'pg';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TesseraError } from '@tessera/core';
import type { ConfigClient } from '@tessera/protocol';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';
import { FAST_CONFIG_ENV, eventually } from '../e2e/helpers.js';
import { RouterApi, onShardDatabase, storedCount } from '../e2e/router-api.js';
import { rootApi, startTestCluster } from '../e2e/test-cluster.js';

/**
 * A seeded randomized fault test: writers on two routers while the balancer splits and moves
 * chunks, a spare shard is added and another drained, and one node at a time is killed or paused.
 * Afterwards the drain completes, no migration record outlives its migration, and every
 * acknowledged write is present exactly once. Every random choice comes from the seed, so a
 * failing schedule replays with TESSERA_CHAOS_SEED (timings still vary from run to run).
 */

const SEED = /^\d+$/.test(process.env.TESSERA_CHAOS_SEED ?? '')
  ? Number(process.env.TESSERA_CHAOS_SEED) >>> 0
  : Math.floor(Math.random() * 2 ** 32);
const FAULT_MS = Number(process.env.TESSERA_CHAOS_SECONDS ?? 60) * 1000;
const TAG = `seed ${SEED}`;
const RANGED = 'chaos.ranged';
const HASHED = 'chaos.hashed';
const BATCH = 20;
const PAD = 'x'.repeat(450);
const SETTLE_MS = 180_000;
const MIGRATION_TABLES = ['migration_registry', 'migration_coordinators', 'migration_recipients'];
/** Balancer rounds back to back, orphans deleted at once, and a migration record no shard runs removed after a 3 s grace. */
const CLUSTER_ENV = {
  ...FAST_CONFIG_ENV,
  TESSERA_BALANCER_ROUND_INTERVAL_MS: '500',
  TESSERA_BALANCER_MIGRATIONS_THROTTLING_MS: '0',
  TESSERA_ORPHAN_CLEANUP_DELAY_SECS: '0',
  TESSERA_MIGRATION_RECORD_GRACE_MS: '3000',
  TESSERA_MIGRATION_RECONCILE_INTERVAL_MS: '1000',
};

/** mulberry32: small, fast and the same on every machine. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const t0 = Date.now();
const log = (message: string) => console.log(`[chaos +${((Date.now() - t0) / 1000).toFixed(1)}s] ${message}`);
const describeError = (error: unknown) => (error instanceof TesseraError ? `${error.code}: ${error.message}` : String(error));

/** Per namespace: ids acknowledged (must be present once), and ids sent without an answer (present at most once). */
const ledger = new Map([RANGED, HASHED].map((ns) => [ns, { acked: new Set<string>(), maybe: new Set<string>() }]));
const faults = new Map<string, number>();
const selfDeaths: string[] = [];

let cluster: LocalCluster;
let dispose: () => Promise<void>;
let configs: ConfigClient[];
let apis: RouterApi[];
let catalog: pg.Pool;

beforeAll(async () => {
  console.log(`chaos seed: ${SEED} (rerun with TESSERA_CHAOS_SEED=${SEED})`);
  ({ cluster, dispose } = await startTestCluster({ configs: 2, shards: 3, spareShards: 1, routers: 2, env: CLUSTER_ENV }));
  configs = [cluster.configClient('config'), cluster.configClient('config1')];
  apis = cluster.routerUrls.map((_, index) => rootApi(cluster, index));
  catalog = new pg.Pool({ connectionString: cluster.node('config').env.TESSERA_DATABASE_URL, max: 2 });
});

afterAll(async () => {
  await Promise.all((apis ?? []).map((api) => api.close()));
  await catalog?.end();
  await dispose?.();
});

/** The config process that answered last: only the leader answers DDL, so calls start there. */
let answering = 0;

/** Runs `action` on whichever config process answers, retrying retryable errors (one may be down or not lead) until `timeoutMs`. */
async function onConfig<T>(what: string, action: (config: ConfigClient) => Promise<T>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (let attempt = 0; ; attempt++) {
    try {
      return await action(configs[answering]!);
    } catch (error) {
      if ((error instanceof TesseraError && !error.retryable) || Date.now() > deadline) {
        throw new Error(`${TAG}: ${what} failed: ${describeError(error)}`, { cause: error });
      }
      if (attempt % 10 === 9) log(`${what}: ${describeError(error)}, retrying`);
      answering = (answering + 1) % configs.length;
      await sleep(300);
    }
  }
}

/** `eventually` with the seed and the last state seen in its failure message. */
async function settle<T>(what: string, probe: () => Promise<T | undefined>, lastSeen: () => unknown, timeoutMs = SETTLE_MS): Promise<T> {
  try {
    return await eventually(probe, what, timeoutMs);
  } catch (error) {
    throw new Error(`${TAG}: ${(error as Error).message}; last seen: ${JSON.stringify(lastSeen())}`);
  }
}

/** One insert of `documents`, unordered; the statement indexes acknowledged (none when the answer is not a 200 or never comes). */
async function insertBatch(api: RouterApi, url: string, ns: string, documents: Array<{ _id: string }>): Promise<Set<number>> {
  const [db, coll] = ns.split('.');
  try {
    const response = await request(`${url}/v1/${db}/${coll}/insert`, {
      dispatcher: api.agent,
      method: 'POST',
      headers: api.headers(true),
      body: JSON.stringify({ documents, ordered: false }),
      // A paused router or shard must not hang the writer.
      headersTimeout: 10_000,
      bodyTimeout: 10_000,
    });
    const text = await response.body.text();
    if (response.statusCode !== 200) return new Set();
    const answer = JSON.parse(text) as { insertedIds?: Record<string, unknown>; writeErrors?: Array<{ index: number }> };
    const failed = new Set((answer.writeErrors ?? []).map((e) => e.index));
    const acked = new Set(documents.map((_, i) => i).filter((i) => !failed.has(i)));
    const inserted = Object.keys(answer.insertedIds ?? {}).length;
    if (inserted !== acked.size) log(`router ${url} answered ${inserted} insertedIds but ${acked.size} statements without error: ${text}`);
    return acked;
  } catch {
    return new Set();
  }
}

/** Inserts batches through router `index` until `running()` says stop; ranged keys half increasing, half scattered below. */
async function writer(index: number, running: () => boolean): Promise<void> {
  const random = prng(SEED ^ Math.imul(index + 1, 0x9e3779b9));
  const url = cluster.routerUrls[index]!;
  for (let seq = 0; running();) {
    const ns = random() < 0.5 ? RANGED : HASHED;
    const documents = Array.from({ length: BATCH }, () => {
      const n = seq++;
      return { _id: `w${index}-${n}`, k: random() < 0.5 ? n : Math.floor(random() * n), pad: PAD };
    });
    const acked = await insertBatch(apis[index]!, url, ns, documents);
    const entry = ledger.get(ns)!;
    documents.forEach((d, i) => (acked.has(i) ? entry.acked : entry.maybe).add(d._id));
    if (acked.size < documents.length) await sleep(200);
  }
}

/** Restarts any node that died without our doing (each fault is undone before the next), noting it. */
async function reviveSelfDeaths(): Promise<void> {
  for (const node of cluster.nodes) {
    const { exitCode, signalCode } = node.process ?? {};
    if (exitCode === null && signalCode === null) continue;
    selfDeaths.push(node.name);
    log(`${node.name} died on its own (code ${exitCode}, signal ${signalCode}); last lines:\n${node.tail.slice(-10).join('\n')}`);
    await cluster.restart(node.name);
  }
}

/**
 * One fault at a time, each starting 2-6 s after the last started (or once it is undone, if
 * later): kill -9 then restart, or SIGSTOP then SIGCONT, of any node. The spare shard is a target
 * before it is added too, so the sequence of choices depends on the seed alone.
 */
async function runFaults(): Promise<void> {
  const random = prng(SEED);
  const start = Date.now();
  const names = cluster.nodes.map((n) => n.name);
  for (let n = 1, last = start; ; n++) {
    const gapMs = 2000 + random() * 4000;
    const victim = names[Math.floor(random() * names.length)]!;
    const kind = random() < 0.5 ? 'kill' : 'pause';
    const holdMs = kind === 'kill' ? 500 + random() * 2500 : 1000 + random() * 4000;
    if (Math.max(last + gapMs, Date.now()) - start >= FAULT_MS) return;
    await sleep(last + gapMs - Date.now());
    await reviveSelfDeaths();
    last = Date.now();
    const what = `${kind === 'kill' ? 'kill -9' : 'SIGSTOP'} ${victim} for ${(holdMs / 1000).toFixed(1)} s`;
    log(`fault ${n} at ${((last - start) / 1000).toFixed(1)} s of the fault phase: ${what}`);
    await cluster.kill(victim, kind === 'kill' ? 'SIGKILL' : 'SIGSTOP');
    await sleep(holdMs);
    if (kind === 'kill') await cluster.restart(victim);
    else await cluster.kill(victim, 'SIGCONT');
    const key = `${kind} ${cluster.node(victim).role}`;
    faults.set(key, (faults.get(key) ?? 0) + 1);
  }
}

/** Per shard, its rows of migration state; range deletions count on member shards only (a removed shard owns nothing to clean for). */
async function migrationState(): Promise<Record<string, number>> {
  const members = new Set((await onConfig('listShards', (c) => c.listShards())).map((s) => s.name));
  const state: Record<string, number> = {};
  for (const shard of cluster.shardNodes.map((n) => n.name)) {
    const tables = [...MIGRATION_TABLES, ...(members.has(shard) ? ['range_deletions'] : [])];
    const sql = `SELECT ${tables.map((t) => `(SELECT count(*) FROM ${t})`).join(' + ')} AS n`;
    state[shard] = await onShardDatabase(cluster, shard, async (pool) => Number((await pool.query<{ n: string }>(sql)).rows[0]!.n));
  }
  return state;
}

/** Calls removeShard until it answers completed; logs an answer when what holds the drain changes, else every 5 s. */
async function completeDrain(shard: string): Promise<void> {
  let last: unknown;
  let logged = { kind: '', at: 0 };
  const probe = async () => {
    const config = configs[answering]!;
    last = await config.removeShard({ name: shard }).catch(async (error: unknown) => {
      answering = (answering + 1) % configs.length;
      // An answer lost to a fault may have been the one that removed the shard.
      const gone = error instanceof TesseraError && error.code === 'SHARD_NOT_FOUND';
      return gone && !(await config.listShards()).some((s) => s.name === shard) ? { state: 'completed', shard } : describeError(error);
    });
    const { state, remaining } = last as { state?: string; remaining?: Record<string, number> };
    const kind = state === undefined ? String(last) : `${state} ${remaining?.migrations ?? '-'} ${remaining?.jumboChunks ?? '-'}`;
    if (kind !== logged.kind || Date.now() - logged.at >= 5000) {
      log(`removeShard ${shard}: ${JSON.stringify(last)}`);
      logged = { kind, at: Date.now() };
    }
    return state === 'completed' ? true : sleep(500).then(() => undefined);
  };
  await settle(`the drain of ${shard} to complete`, probe, () => last);
}

/** Every acknowledged id once, no id twice, nothing the writers did not send; and the member shards store exactly that. */
async function checkData(ns: string): Promise<number> {
  const { acked, maybe } = ledger.get(ns)!;
  let lastError: unknown;
  const read = () => apis[0]!.findAll(ns, { filter: {}, projection: { _id: 1 }, batchSize: 1_000_000 });
  const found = await settle(
    `a full read of ${ns}`,
    () => read().catch((error: unknown) => void (lastError = describeError(error))),
    () => lastError,
  );
  const copies = new Map<string, number>();
  for (const d of found as Array<{ _id: string }>) copies.set(d._id, (copies.get(d._id) ?? 0) + 1);
  const first = (ids: string[]) => `${ids.length} ids, first ${JSON.stringify(ids.slice(0, 20))}`;
  const lost = [...acked].filter((id) => !copies.has(id));
  const doubled = [...copies].filter(([, n]) => n > 1).map(([id]) => id);
  const invented = [...copies.keys()].filter((id) => !acked.has(id) && !maybe.has(id));
  expect(lost, `${TAG}: acknowledged writes missing from ${ns}: ${first(lost)}`).toEqual([]);
  expect(doubled, `${TAG}: ids present more than once in ${ns}: ${first(doubled)}`).toEqual([]);
  expect(invented, `${TAG}: ids nobody wrote in ${ns}: ${first(invented)}`).toEqual([]);
  const members = (await onConfig('listShards', (c) => c.listShards())).map((s) => s.name);
  const stored = await Promise.all(members.map((shard) => storedCount(cluster, shard, ns)));
  const total = stored.reduce((a, b) => a + b, 0);
  expect(total, `${TAG}: rows the member shards ${members} store for ${ns} (${stored}), no range deletion pending`).toBe(found.length);
  return found.length;
}

/** The spare shard joins at a third of the fault phase; `drained` starts draining at half. */
async function changeTopology(faultStart: number, drained: string): Promise<void> {
  await sleep(faultStart + FAULT_MS / 3 - Date.now());
  const shard3 = cluster.node('shard3').url;
  log(`addShard shard3: ${JSON.stringify(await onConfig('addShard', (c) => c.addShard({ name: 'shard3', url: shard3 })))}`);
  await sleep(faultStart + FAULT_MS / 2 - Date.now());
  log(`removeShard ${drained}: ${JSON.stringify(await onConfig('removeShard', (c) => c.removeShard({ name: drained })))}`);
}

/** Writers, faults and the topology changes for FAULT_MS; every node runs again and a config process leads when it returns. */
async function faultPhase(drained: string): Promise<void> {
  const faultStart = Date.now();
  let writing = true;
  const writers = [0, 1].map((i) => writer(i, () => writing));
  // Its failure is rethrown once the faults are over, so no rejection goes unhandled meanwhile.
  const topology = changeTopology(faultStart, drained).then(
    () => undefined,
    (error: unknown) => error,
  );
  try {
    await runFaults();
    await sleep(faultStart + FAULT_MS - Date.now());
  } finally {
    writing = false;
    await Promise.all(writers);
  }
  const topologyError = await topology;
  if (topologyError !== undefined) throw topologyError;
  log('fault phase over; resuming every node');
  for (const node of cluster.nodes) await cluster.kill(node.name, 'SIGCONT');
  await reviveSelfDeaths();
  const leads = async (c: ConfigClient) => (await c.leader().catch(() => undefined))?.self.isLeader === true;
  const anyLeads = async () => (await Promise.all(configs.map(leads))).includes(true) || undefined;
  await settle('a config leader', anyLeads, () => 'none', 60_000);
}

/** With the balancer off, shards end their migrations; then no record may remain, nor come back. */
async function checkMigrationRecords(): Promise<void> {
  await onConfig('turning the balancer off', (c) => c.updateSettings({ balancer: { mode: 'off' } }));
  let state: Record<string, number> = {};
  const idle = async () => Object.values((state = await migrationState())).every((n) => n === 0) || undefined;
  await settle('no shard to hold migration state', idle, () => state);
  const records = async () => (await catalog.query('SELECT id, ns, donor, recipient, started_at FROM active_migrations')).rows;
  let left: unknown[] = [];
  const empty = async () => (left = await records()).length === 0 || undefined;
  await settle('active_migrations to empty once no shard runs a migration', empty, () => left, 30_000);
  await sleep(3000);
  expect(await records(), `${TAG}: migration records reappeared with no migration running`).toEqual([]);
}

describe('chaos: kills and pauses of every process kind while the cluster balances, grows and drains', () => {
  it('keeps every acknowledged write exactly once, ends every migration record and completes the drain', async () => {
    await onConfig('setting the chunk size', (c) => c.updateSettings({ chunkSizeBytes: 64 * 1024 }));
    await onConfig('enableSharding', (c) => c.enableSharding({ db: 'chaos' }));
    await onConfig('shardCollection', (c) => c.shardCollection({ ns: RANGED, key: { k: 1 } }));
    await onConfig('shardCollection', (c) => c.shardCollection({ ns: HASHED, key: { _id: 'hashed' } }));
    const primary = (await onConfig('getDatabase', (c) => c.getDatabase('chaos'))).primaryShard;
    const drained = cluster.memberShards.map((n) => n.name).filter((s) => s !== primary)[Math.floor(prng(SEED ^ 0x5bd1e995)() * 2)]!;
    log(`primary shard ${primary}; shard3 joins at ${FAULT_MS / 3000} s, ${drained} drains from ${FAULT_MS / 2000} s`);

    await faultPhase(drained);
    const drainStart = Date.now();
    await completeDrain(drained);
    const drainMs = Date.now() - drainStart;
    await checkMigrationRecords();
    const found = new Map([RANGED, HASHED].map((ns) => [ns, 0]));
    for (const ns of found.keys()) found.set(ns, await checkData(ns));
    const acked = [...ledger.values()].reduce((n, l) => n + l.acked.size, 0);
    expect(acked, `${TAG}: no write was acknowledged at all`).toBeGreaterThan(0);

    const changes = await catalog.query<{ what: string; n: string }>(
      "SELECT what, count(*) AS n FROM changelog WHERE ns = ANY($1) AND what IN ('split', 'multi-split', 'merge', 'moveChunk.commit') GROUP BY what",
      [[RANGED, HASHED]],
    );
    const summary = [
      `chaos summary (seed ${SEED}, ${FAULT_MS / 1000} s of faults)`,
      `  faults: ${JSON.stringify(Object.fromEntries(faults))}; nodes that died on their own: ${JSON.stringify(selfDeaths)}`,
      ...[...ledger].map(([ns, l]) => `  ${ns}: ${l.acked.size} acknowledged, ${l.maybe.size} maybe, ${found.get(ns)} found`),
      `  changelog: ${JSON.stringify(Object.fromEntries(changes.rows.map((r) => [r.what, Number(r.n)])))}`,
      `  drain of ${drained} completed ${(drainMs / 1000).toFixed(1)} s after the fault phase`,
    ];
    console.log(summary.join('\n'));
  }, 600_000);
});
