import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { Agent, request } from 'undici';
import { planBenchCluster } from './crud-fixture.js';

/**
 * bench:aggregate — issue 30's figure. A `$match` + `$group` over `BENCH_DOCS` documents (1M by
 * default) in a collection hashed on `_id` over 3 shards, through the router, against the same
 * aggregation as one SQL `GROUP BY` run straight in Postgres over the same rows: one table of
 * the same documents on the cluster's own server, stored as Tessera stores them (`json`), and
 * for reference a `jsonb` copy. Runs alternate, `BENCH_RUNS` of each; the figure is Postgres's
 * median time over Tessera's (the share of Postgres's speed; goal ≥ 0.30).
 * The answers are checked equal, and a point-targeted pipeline is checked to reach one shard.
 */
const DOCS = Number(process.env.BENCH_DOCS ?? 1_000_000);
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const BATCH = 1_000;
const LOADERS = 4;

const document = (i: number) => ({ _id: i, region: `r${i % 10}`, status: i % 3 === 0 ? 'A' : 'B', amount: (i * 37) % 1000, qty: i % 17 });
const PIPELINE = [
  { $match: { status: 'A' } },
  { $group: { _id: '$region', total: { $sum: '$amount' }, orders: { $sum: 1 }, mean: { $avg: '$qty' }, largest: { $max: '$amount' } } },
  { $sort: { _id: 1 } },
];
const SQL = `SELECT doc->>'region' AS _id, sum((doc->>'amount')::numeric) AS total, count(*) AS orders,
  avg((doc->>'qty')::numeric) AS mean, max((doc->>'amount')::numeric) AS largest
  FROM sales WHERE doc->>'status' = 'A' GROUP BY 1 ORDER BY 1`;

interface Group {
  _id: string;
  total: number;
  orders: number;
  mean: number;
  largest: number;
}

const dir = mkdtempSync(join(tmpdir(), 'tessera-bench-aggregate-'));
chmodSync(dir, 0o755);
const cluster = await planBenchCluster(dir);
const agent = new Agent({ connections: LOADERS * 2 });

async function post(url: string, body: unknown): Promise<unknown> {
  const response = await request(url, {
    dispatcher: agent,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const json = (await response.body.json()) as unknown;
  if (response.statusCode !== 200) throw new Error(`${url} answered ${response.statusCode}: ${JSON.stringify(json)}`);
  return json;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

try {
  console.log(`bench:aggregate — ${DOCS} documents on 3 shards (hashed _id), ${RUNS} runs each`);
  await cluster.start();
  const config = cluster.configClient();
  for (let i = 0; i < 50 && !(await config.leader()).self.isLeader; i++) await new Promise((r) => setTimeout(r, 100));
  const router = cluster.routerUrls[0]!;
  await config.shardCollection({ ns: 'bench.sales', key: { _id: 'hashed' } });

  const loadStart = Date.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: LOADERS }, async () => {
      for (let start = next; start < DOCS; start = next) {
        next += BATCH;
        const documents = Array.from({ length: Math.min(BATCH, DOCS - start) }, (_, i) => document(start + i));
        await post(`${router}/v1/bench/sales/insert`, { documents, ordered: false });
      }
    }),
  );
  console.log(`  loaded through the router in ${((Date.now() - loadStart) / 1000).toFixed(1)} s`);

  const shardUrl = cluster.node('shard0').env.TESSERA_DATABASE_URL!;
  const admin = new pg.Client({ connectionString: shardUrl });
  await admin.connect();
  await admin.query('CREATE DATABASE bench_raw');
  await admin.end();
  const raw = new pg.Client({ connectionString: shardUrl.replace(/\/[^/?]+(\?|$)/, '/bench_raw$1') });
  raw.on('error', () => undefined); // the cluster's Postgres stops under it at the end
  await raw.connect();
  // The same rows twice: as Tessera stores them (json text, which keeps MongoDB's field order) and
  // as jsonb (parsed once at insert, fields reordered), which Tessera cannot use but users compare to.
  for (const [table, type, build] of [
    ['sales', 'json', 'json_build_object'],
    ['sales_jsonb', 'jsonb', 'jsonb_build_object'],
  ] as const) {
    await raw.query(`CREATE TABLE ${table} (id bigint PRIMARY KEY, doc ${type} NOT NULL)`);
    await raw.query(
      `INSERT INTO ${table} SELECT i, ${build}('_id', i, 'region', 'r' || (i % 10), 'status', CASE WHEN i % 3 = 0 THEN 'A' ELSE 'B' END,
        'amount', (i * 37) % 1000, 'qty', i % 17) FROM generate_series(0, $1::int - 1) AS i`,
      [DOCS],
    );
    await raw.query(`VACUUM ANALYZE ${table}`);
  }

  const tessera: number[] = [];
  const postgres: number[] = [];
  const postgresJsonb: number[] = [];
  let fromTessera: Group[] = [];
  let fromPostgres: Group[] = [];
  for (let run = 0; run < RUNS; run++) {
    let started = performance.now();
    const answer = (await post(`${router}/v1/bench/sales/aggregate`, { pipeline: PIPELINE })) as { cursor: { firstBatch: Group[] } };
    tessera.push(performance.now() - started);
    fromTessera = answer.cursor.firstBatch;
    started = performance.now();
    const { rows } = await raw.query<Record<keyof Group, string>>(SQL);
    postgres.push(performance.now() - started);
    fromPostgres = rows.map((r) => ({
      _id: r._id,
      total: Number(r.total),
      orders: Number(r.orders),
      mean: Number(r.mean),
      largest: Number(r.largest),
    }));
    started = performance.now();
    await raw.query(SQL.replace('FROM sales', 'FROM sales_jsonb'));
    postgresJsonb.push(performance.now() - started);
  }
  await raw.end();
  const close = (a: Group, b: Group) =>
    a._id === b._id && a.total === b.total && a.orders === b.orders && a.largest === b.largest && Math.abs(a.mean - b.mean) < 1e-9;
  const same = fromTessera.length === fromPostgres.length && fromTessera.every((g, i) => close(g, fromPostgres[i]!));
  if (!same) throw new Error(`the answers differ:\n${JSON.stringify(fromTessera)}\n${JSON.stringify(fromPostgres)}`);

  const point = (await post(`${router}/v1/bench/sales/aggregate`, {
    pipeline: [{ $match: { _id: 12345 } }, { $project: { amount: 1 } }],
    explain: true,
  })) as {
    explain: { targetedShards: string[] };
  };
  if (point.explain.targetedShards.length !== 1)
    throw new Error(`a point-targeted pipeline reached ${point.explain.targetedShards.join(', ')}`);

  const t = median(tessera);
  const p = median(postgres);
  const pb = median(postgresJsonb);
  const runs = (values: number[]) => values.map((v) => v.toFixed(0)).join(', ');
  console.log(
    `  answers equal (${fromTessera.length} groups); a point-targeted pipeline reaches 1 shard (${point.explain.targetedShards[0]})`,
  );
  console.log(`  Tessera (router, 3 shards):        median ${t.toFixed(0)} ms  [${runs(tessera)}]`);
  console.log(`  Postgres GROUP BY, json rows:      median ${p.toFixed(0)} ms  [${runs(postgres)}]`);
  console.log(`  Postgres GROUP BY, jsonb rows:     median ${pb.toFixed(0)} ms  [${runs(postgresJsonb)}]`);
  console.log(
    `  share of Postgres's speed over the same (json) rows: ${(p / t).toFixed(2)} (goal >= 0.30); over jsonb: ${(pb / t).toFixed(2)}`,
  );
} finally {
  await cluster.stop();
  await agent.close();
  rmSync(dir, { recursive: true, force: true });
}
