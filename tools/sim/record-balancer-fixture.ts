import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { Agent, request } from 'undici';
import { TesseraError } from '@tessera/core';
import { ConfigClient, MigrationClient } from '@tessera/protocol';
import { LocalCluster, freePort } from '../cluster/local-cluster.js';

/**
 * `npm run record:balancer-fixture`: records the cluster snapshot that the balancer round spec
 * replays through the config server's round and through the simulator
 * (apps/config/src/balancer/fixtures/recorded-cluster.json). It starts a local cluster of real
 * processes (4 shards and 2 spare ones, one router), balancer off, and brings it to a state with
 * work of every kind for one round:
 *
 * - `shop.orders` sharded on `{ customerId: 1 }` with a 1 MiB chunk size, loaded through the
 *   router so the shard's auto-splitter cuts the chunks, and one key value holding more than a
 *   chunk, which the auto-splitter cannot split and marks jumbo;
 * - chunks moved by moveRange: keys from 1000 on alternate between shard1 and shard2, from 2000
 *   on go to shard2, from 2500 on to shard3;
 * - zone EU = [1000, 2000) on shard0 and shard1, so shard2's chunks there violate it;
 * - the two spare shards added empty, and shard3 removed (draining, as the balancer is off).
 *
 * It then writes what the round reads: the catalog's `shards`, `collections`, `chunks` and `tags`
 * rows (bytea in hex) and each shard's `statsForBalancing` answer.
 */
const NS = 'shop.orders';
const KEYS = 3000;
const DOCS_PER_KEY = 2;
const JUMBO_KEY = 42;
const JUMBO_DOCS = 1500;
const DOC_BYTES = 1000;
const CHUNK_SIZE = 1024 * 1024;
const repoRoot = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..', '..');
const out = process.argv[2] ?? join(repoRoot, 'apps/config/src/balancer/fixtures/recorded-cluster.json');

const dir = mkdtempSync(join(tmpdir(), 'tessera-record-'));
chmodSync(dir, 0o755);
const agent = new Agent({ connections: 8 });
const cluster = new LocalCluster({
  rootDir: dir,
  distDir: join(repoRoot, 'dist'),
  shards: 4,
  spareShards: 2,
  routers: 1,
  pgPort: await freePort(),
  fresh: true,
  unsafeFastPostgres: true,
  ports: {
    config: await freePort(),
    router: await freePort(),
    shard: await Promise.all(Array.from({ length: 6 }, () => freePort())),
  },
  databasePrefix: 'record',
  env: { TESSERA_LOG_LEVEL: 'warn' },
  onProgress: (message) => console.log(`  ${message}`),
});

async function insert(documents: unknown[]): Promise<void> {
  const response = await request(`${cluster.routerUrls[0]}/v1/shop/orders/insert`, {
    dispatcher: agent,
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${cluster.rootKey}` },
    body: JSON.stringify({ documents, ordered: false }),
  });
  const answer = await response.body.text();
  if (response.statusCode !== 200) throw new Error(`router answered ${response.statusCode}: ${answer.slice(0, 300)}`);
}

const filler = 'x'.repeat(DOC_BYTES - 60);
let nextId = 0;

/** DOCS_PER_KEY documents per key in [0, KEYS), in batches of 200. */
async function load(): Promise<void> {
  const keys = Array.from({ length: KEYS * DOCS_PER_KEY }, (_, i) => i % KEYS);
  for (let first = 0; first < keys.length; first += 200) {
    await insert(keys.slice(first, first + 200).map((customerId) => ({ _id: nextId++, customerId, filler })));
  }
}

/**
 * Writes JUMBO_DOCS documents under JUMBO_KEY, then more in batches until the auto-splitter, having
 * split the key's neighbours off, finds its chunk holds that one key and marks it jumbo.
 */
async function growJumbo(config: ConfigClient): Promise<void> {
  const batch = (n: number) => insert(Array.from({ length: n }, () => ({ _id: nextId++, customerId: JUMBO_KEY, filler })));
  for (let written = 0; written < JUMBO_DOCS; written += 200) await batch(200);
  for (let i = 0; i < 50; i++) {
    await sleep(200);
    if ((await config.getChunks({ ns: NS })).chunks.some((c) => c.jumbo)) return;
    await batch(250);
  }
  throw new Error('no chunk was marked jumbo');
}

/** Where a chunk starting at `min` goes (see the file's comment). */
function placementOf(min: number, index: number): string | undefined {
  if (min >= 2500) return 'shard3';
  if (min >= 2000) return 'shard2';
  if (min >= 1000) return index % 2 === 0 ? 'shard1' : 'shard2';
  return undefined;
}

/**
 * Moves the chunks to their placement. A chunk still over the max chunk size refuses to move
 * (`CHUNK_TOO_BIG`) until the auto-splitter has cut it: then the chunks are read again.
 */
async function place(config: ConfigClient): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      const { chunks } = await config.getChunks({ ns: NS });
      let index = 0;
      for (const chunk of chunks) {
        const min = chunk.range.min[0];
        if (typeof min !== 'number') continue;
        const to = placementOf(min, index++);
        if (to !== undefined && to !== chunk.shard) await config.moveRange({ ns: NS, min: { customerId: min }, toShard: to });
      }
      return;
    } catch (error) {
      if (!(error instanceof TesseraError && error.code === 'CHUNK_TOO_BIG') || attempt === 30) throw error;
      await sleep(500);
    }
  }
}

async function dumpCatalog(databaseUrl: string): Promise<Record<string, unknown[]>> {
  const catalog = new pg.Client({ connectionString: databaseUrl });
  await catalog.connect();
  try {
    const query = async (sql: string) => (await catalog.query(sql)).rows.map(hexOfBuffers);
    return {
      shards: await query('SELECT name, url, state, zones FROM shards ORDER BY name'),
      collections: await query('SELECT * FROM collections ORDER BY ns'),
      chunks: await query('SELECT * FROM chunks ORDER BY collection_uuid, min'),
      tags: await query('SELECT ns, min, max, tag FROM tags ORDER BY ns, min'),
    };
  } finally {
    await catalog.end();
  }
}

function hexOfBuffers(row: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(row).map(([k, v]) => [k, Buffer.isBuffer(v) ? v.toString('hex') : v]));
}

async function statsForBalancing(config: ConfigClient): Promise<Record<string, Record<string, number>>> {
  const stats: Record<string, number> = {};
  for (const shard of await config.listShards()) {
    const client = new MigrationClient(shard.url, { clusterKey: cluster.clusterKey, dispatcher: agent });
    stats[shard.name] = (await client.statsForBalancing({ namespaces: [NS] })).stats[0]!.collSize;
  }
  return { [NS]: stats };
}

try {
  await cluster.start();
  const config = new ConfigClient(cluster.configUrl, { clusterKey: cluster.clusterKey, dispatcher: agent, timeoutMs: 120_000 });
  for (let i = 0; i < 50 && !(await config.leader()).self.isLeader; i++) await sleep(100);
  await config.updateSettings({ balancer: { mode: 'off' } });
  await config.enableSharding({ db: 'shop', primaryShard: 'shard0' });
  await config.shardCollection({ ns: NS, key: { customerId: 1 } });
  await config.configureCollectionBalancing({ ns: NS, chunkSizeBytes: CHUNK_SIZE });
  await load();
  await growJumbo(config);
  await place(config);
  for (const shard of ['shard0', 'shard1']) await config.addShardToZone({ shard, zone: 'EU' });
  await config.updateZoneKeyRange({ ns: NS, min: { customerId: 1000 }, max: { customerId: 2000 }, zone: 'EU' });
  for (const spare of cluster.shardNodes.slice(4)) await config.addShard({ name: spare.name, url: spare.url });
  await config.removeShard({ name: 'shard3' });

  const recording = {
    description:
      `Recorded by tools/sim/record-balancer-fixture.ts from a live cluster: ${NS} on six shards, shard3 draining, ` +
      'shard4 and shard5 just added and empty, zone EU [1000, 2000) on shard0 and shard1 with chunks of it on shard2, ' +
      `one jumbo chunk (key ${JUMBO_KEY}) on shard0; catalog rows as the balancer reads them (bytea in hex).`,
    clusterSettings: { chunkSizeBytes: CHUNK_SIZE },
    ...(await dumpCatalog(cluster.node('config').env.TESSERA_DATABASE_URL!)),
    statsForBalancing: await statsForBalancing(config),
  };
  writeFileSync(out, `${JSON.stringify(recording, null, 2)}\n`);
  console.log(`wrote ${out}`);
} finally {
  await cluster.stop();
  await agent.close();
  rmSync(dir, { recursive: true, force: true });
}
