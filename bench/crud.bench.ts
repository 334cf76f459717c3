import { closeCrudHost, openCrudHost, startCrudFixture } from './crud-fixture.js';
import { runInserts } from './crud-inserts.js';
import { runReads } from './crud-reads.js';
import { CrudReport } from './crud-report.js';
import { readCrudSettings } from './crud-settings.js';

/**
 * bench:crud — on a local cluster of real processes (3 shards, 3 routers, one embedded Postgres
 * with its default durable settings): inserts per second through the router for batches of 1
 * and of 100 documents of about 200 bytes, against raw `pg` inserts of the same rows into one
 * database of the same server with the same batch sizes and concurrency (the physical limit
 * here), and the same router inserts as retryable writes (a session per client, the next
 * txnNumber per command) against those without a session, also in alternating slices, which
 * the goal is judged on; the same plain inserts with the shards' size triggers on and off, in
 * alternating slices (the cost of the balancer's write tracking), and through two twin routers
 * of which one checks every caller's API key and roles (TESSERA_AUTHORIZATION=enabled), also in
 * alternating slices (the cost of access control, judged against the issue's goal); then point
 * reads by shard key, p50/p99, through the router and straight from a shard.
 * Everything, load generator included, shares this machine's cores, so each run also prints the
 * CPU time every process spent per document or read (from /proc, Linux only): where the cores went.
 *
 * The floor runs the same load through the cluster's shape with nothing in it: a relay process
 * where the router is and three store processes where the shards are, bare Fastify and undici,
 * each store writing its documents with the raw baseline's statement (see hop-floor-server.ts).
 * Its ratio is what two HTTP hops on Node leave of the raw rate on this machine, before any
 * routing, versioning, validation or storage work. The router reaches its shards over the
 * internal wire, which costs less than an HTTP hop, so the floor is a reference, not a bound.
 *
 * The pieces: crud-settings.ts (durations, sizes, the documents), crud-fixture.ts (the cluster,
 * the raw baseline's database, the floor's processes), crud-inserts.ts and crud-reads.ts (the
 * measured phases), crud-report.ts (what they found, printed at the end).
 */
const settings = readCrudSettings(process.env);
const host = await openCrudHost(settings);

try {
  console.log('bench:crud — starting a local cluster (3 shards, 3 routers)');
  const fixture = await startCrudFixture(host, settings);
  const report = new CrudReport();
  await runInserts(fixture, settings, report);
  await runReads(fixture, settings, report);
  await fixture.raw.end();
  report.print(settings);
  await fixture.background.close();
} finally {
  await closeCrudHost(host);
}
