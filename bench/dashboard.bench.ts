import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createClient } from 'graphql-ws';
import { type Page, chromium } from 'playwright-core';
import WebSocket from 'ws';
import { percentile } from '@tessera/core';
import { LocalCluster, freePort } from '../tools/cluster/local-cluster.js';

/**
 * bench:dashboard — headless Chromium (Debian's, /usr/bin/chromium) on the dashboard of a local
 * cluster of real processes (1 config server, 2 shards, one embedded Postgres).
 *
 * 1. Commit to drawing: BENCH_CHANGES splits (200) at BENCH_RATE per second (50) through the
 *    control plane's splitChunk, each timed from its changelog time (the commit's transaction, so
 *    an upper bound) to the moment the key-space band has drawn its seq (a MutationObserver on the
 *    canvas, the page's clock, which is this machine's). Baseline in the same run: the same events
 *    to a graphql-ws client in this process, the transport's own floor. Ratio page ÷ socket.
 * 2. Frame time: a hashed collection of BENCH_CHUNKS chunks (100,000), loaded by the page, then
 *    BENCH_MOVES chunk moves; every draw of the band is timed in the page (data-frame-ms). Baseline:
 *    the same at 1,000 chunks. Goal: ≤ 50 ms per update at 100,000.
 */
const CHANGES = Number(process.env.BENCH_CHANGES ?? 200);
const RATE = Number(process.env.BENCH_RATE ?? 50);
const BIG = Number(process.env.BENCH_CHUNKS ?? 100_000);
const MOVES = Number(process.env.BENCH_MOVES ?? 10);
const ADMIN = 'bench-admin-token-0123456789';
const repoRoot = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..');

const dir = mkdtempSync(join(tmpdir(), 'tessera-bench-dashboard-'));
chmodSync(dir, 0o755);
const cluster = new LocalCluster({
  rootDir: dir,
  distDir: join(repoRoot, 'dist'),
  shards: 2,
  routers: 0,
  pgPort: await freePort(),
  fresh: true,
  ports: { config: await freePort(), router: [], shard: [await freePort(), await freePort()] },
  databasePrefix: 'bench',
  env: { TESSERA_LOG_LEVEL: 'warn', TESSERA_ADMIN_TOKEN: ADMIN },
  onProgress: (message) => console.log(`  ${message}`),
});

async function graphql<T>(query: string, variables: Record<string, unknown> = {}): Promise<T> {
  const response = await fetch(`${cluster.configUrl}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN}` },
    body: JSON.stringify({ query, variables }),
  });
  const answer = (await response.json()) as { data?: T; errors?: Array<{ message: string }> };
  if (answer.errors?.length) throw new Error(answer.errors.map((e) => e.message).join('; '));
  return answer.data!;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const stats = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return { n: sorted.length, p50: percentile(sorted, 50), p99: percentile(sorted, 99), max: sorted[sorted.length - 1]! };
};
const fmt = (s: { n: number; p50: number; p99: number; max: number }) =>
  `p50 ${s.p50.toFixed(1)} ms, p99 ${s.p99.toFixed(1)} ms, max ${s.max.toFixed(1)} ms (n=${s.n})`;

/** Opens the key-space view of `ns` signed in, and records in the page every draw: [seq, Date.now(), frame ms, chunks]. */
async function openBand(ns: string): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  await page.goto(`${cluster.configUrl}/#/keyspace?ns=${ns}`);
  await page.getByLabel('Control-plane token').fill(ADMIN);
  await page.getByRole('button', { name: 'Sign in' }).click();
  const band = page.getByTestId('keyspace-band');
  await band.waitFor();
  await page.evaluate(`(() => {
    const band = document.querySelector('[data-testid=keyspace-band]');
    window.__draws = [];
    new MutationObserver(() => window.__draws.push([Number(band.dataset.seq), Date.now(), Number(band.dataset.frameMs), Number(band.dataset.chunks)]))
      .observe(band, { attributes: true, attributeFilter: ['data-frame-ms', 'data-seq'] });
  })()`);
  return page;
}

/** Waits until the band has drawn `chunks` chunks (the page's CSP forbids waitForFunction's eval). */
async function drawnChunks(page: Page, chunks: number, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  const band = page.getByTestId('keyspace-band');
  while (Number(await band.getAttribute('data-chunks')) !== chunks) {
    if (performance.now() > deadline) throw new Error(`the band did not show ${chunks} chunks within ${timeoutMs} ms`);
    await sleep(50);
  }
}

const draws = async (page: Page) => (await page.evaluate('window.__draws')) as Array<[number, number, number, number]>;

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-background-networking', '--disable-component-update'],
});
try {
  await cluster.start();
  await graphql('mutation { setBalancerState(enabled: false) { mode } }');

  // 1. Commit to drawing, against commit to a graphql-ws client.
  const ns = 'bench.splits';
  await graphql('mutation($input: ShardCollectionInput!) { shardCollection(input: $input) { ns } }', { input: { ns, key: { x: 1 } } });
  const page = await openBand(ns);
  await drawnChunks(page, 1, 20_000);
  const socketArrivals = new Map<number, { at: number; time: string }>();
  const client = createClient({
    url: `${cluster.configUrl.replace('http', 'ws')}/graphql`,
    webSocketImpl: WebSocket,
    connectionParams: { authorization: ADMIN },
  });
  const since = (await graphql<{ cluster: { lastEventSeq: number } }>('{ cluster { lastEventSeq } }')).cluster.lastEventSeq;
  const unsubscribe = client.subscribe<{ chunkPlacementChanged: { seq: number; time: string } }>(
    { query: `subscription { chunkPlacementChanged(ns: "${ns}", since: ${since}) { seq time } }` },
    {
      next: (r) =>
        r.data && socketArrivals.set(r.data.chunkPlacementChanged.seq, { at: Date.now(), time: r.data.chunkPlacementChanged.time }),
      error: () => undefined,
      complete: () => undefined,
    },
  );
  await sleep(500);
  const start = performance.now();
  for (let i = 1; i <= CHANGES; i++) {
    await graphql(`mutation { splitChunk(ns: "${ns}", at: { x: ${i} }) { version } }`);
    const due = start + (i * 1000) / RATE;
    if (due > performance.now()) await sleep(due - performance.now());
  }
  const achieved = CHANGES / ((performance.now() - start) / 1000);
  await drawnChunks(page, CHANGES + 1, 60_000);
  unsubscribe();
  await client.dispose();
  const drawn = await draws(page);
  const toPage: number[] = [];
  const toSocket: number[] = [];
  for (const [seq, arrival] of socketArrivals) {
    const committed = Date.parse(arrival.time);
    const draw = drawn.find(([s]) => s >= seq);
    if (draw === undefined) throw new Error(`seq ${seq} was never drawn`);
    toPage.push(draw[1] - committed);
    toSocket.push(arrival.at - committed);
  }
  const pageStats = stats(toPage);
  const socketStats = stats(toSocket);
  console.log(`\ncommit → drawn on the page, ${CHANGES} splits at ${achieved.toFixed(1)}/s: ${fmt(pageStats)}`);
  console.log(`commit → graphql-ws client (baseline): ${fmt(socketStats)}`);
  console.log(
    `ratio page ÷ socket: p50 ${(pageStats.p50 / socketStats.p50).toFixed(2)}, p99 ${(pageStats.p99 / socketStats.p99).toFixed(2)}; goal p99 ≤ 1000 ms: ${pageStats.p99 <= 1000 ? 'met' : 'missed'}`,
  );
  await page.close();

  // 2. Frame time at BIG chunks against 1,000.
  const frames: Record<number, ReturnType<typeof stats>> = {};
  for (const chunks of [1_000, BIG]) {
    const big = `bench.hashed${chunks}`;
    const created = performance.now();
    await graphql('mutation($input: ShardCollectionInput!) { shardCollection(input: $input) { ns } }', {
      input: { ns: big, key: { _id: 'hashed' }, numInitialChunks: chunks },
    });
    const createdMs = performance.now() - created;
    const loading = performance.now();
    const bigPage = await openBand(big);
    await drawnChunks(bigPage, chunks, 600_000);
    const loadedMs = performance.now() - loading;
    await bigPage.evaluate('window.__draws = []');
    const { collection } = await graphql<{ collection: { chunks: { nodes: Array<{ min: unknown; max: unknown; shard: string }> } } }>(
      `{ collection(ns: "${big}") { chunks(first: ${MOVES}) { nodes { min max shard } } } }`,
    );
    for (const chunk of collection.chunks.nodes) {
      const to = chunk.shard === 'shard0' ? 'shard1' : 'shard0';
      await graphql(
        'mutation($ns: String!, $bounds: [JSON!], $to: String!) { moveChunk(ns: $ns, bounds: $bounds, to: $to, wait: true) { state } }',
        {
          ns: big,
          // Bounds name the key field; a hashed key's bounds are hashes, as MongoDB's moveChunk takes them.
          bounds: [{ _id: (chunk.min as unknown[])[0] }, { _id: (chunk.max as unknown[])[0] }],
          to,
        },
      );
    }
    await sleep(2_500);
    const timed = (await draws(bigPage)).map(([, , ms]) => ms).filter((ms) => Number.isFinite(ms));
    frames[chunks] = stats(timed);
    console.log(
      `\n${chunks} chunks: shardCollection ${createdMs.toFixed(0)} ms, page read them in ${loadedMs.toFixed(0)} ms; band draw during ${MOVES} moves: ${fmt(frames[chunks])}`,
    );
    await bigPage.close();
  }
  const ratio = frames[BIG]!.p99 / frames[1_000]!.p99;
  console.log(
    `frame time ${BIG} ÷ 1,000 chunks: p99 ${ratio.toFixed(2)}; goal ≤ 50 ms per update at ${BIG}: ${frames[BIG]!.max <= 50 ? 'met' : 'missed'} (max ${frames[BIG]!.max.toFixed(1)} ms)`,
  );
} finally {
  await browser.close();
  await cluster.stop();
  rmSync(dir, { recursive: true, force: true });
}
