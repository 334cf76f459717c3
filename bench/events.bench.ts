import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Client, createClient } from 'graphql-ws';
import { type Socket, io } from 'socket.io-client';
import WebSocket from 'ws';
import { type ChunkVersion, percentile } from '@tessera/core';
import { LocalCluster, freePort } from '../tools/cluster/local-cluster.js';

/**
 * bench:events — on a local cluster of real processes (1 config server, 1 shard, one embedded
 * Postgres): metadata commits (splits, through the same internal call a shard's auto-split
 * makes) one at a time, each timed from the moment the commit request is sent (so the figure
 * includes the HTTP call and the transaction, an upper bound of commit-to-delivery) until every
 * subscriber has received its event: GraphQL `chunkPlacementChanged` over graphql-ws and
 * socket.io `/events` in room `ns:<ns>`. Then more and more subscribers, to find how many one
 * config process serves with p99 under 100 ms. The clients share this machine's cores with the
 * server and Postgres.
 */
const EVENTS = Number(process.env.BENCH_EVENTS ?? 1_000);
const RAMP_EVENTS = Number(process.env.BENCH_RAMP_EVENTS ?? 200);
const RAMP = (process.env.BENCH_RAMP ?? '200,400,800,1600').split(',').map(Number);
const TOKEN = 'bench-viewer-token-0123456789';
const NS = 'bench.events';
const repoRoot = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..');

/** Delivery of the split at key `k` to each subscriber. */
class Deliveries {
  private readonly started = new Map<number, number>();
  private readonly waiting = new Map<number, { left: number; done: () => void }>();
  readonly latencies = { graphql: [] as number[], socketio: [] as number[] };
  /** From sending the commit to its acknowledgement: the commit's own share of the figures. */
  commits: number[] = [];

  expect(k: number, subscribers: number): Promise<void> {
    this.started.set(k, performance.now());
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`event ${k} not delivered to every subscriber within 10 s`)), 10_000);
      this.waiting.set(k, {
        left: subscribers,
        done: () => {
          clearTimeout(timer);
          resolve();
        },
      });
    });
  }

  arrived(k: number, via: 'graphql' | 'socketio'): void {
    const started = this.started.get(k);
    const waiting = this.waiting.get(k);
    if (started === undefined || waiting === undefined) return;
    this.latencies[via].push(performance.now() - started);
    if (--waiting.left === 0) {
      this.waiting.delete(k);
      waiting.done();
    }
  }

  reset(): void {
    this.latencies.graphql = [];
    this.latencies.socketio = [];
    this.commits = [];
  }
}

const dir = mkdtempSync(join(tmpdir(), 'tessera-bench-events-'));
chmodSync(dir, 0o755);
const cluster = new LocalCluster({
  rootDir: dir,
  distDir: join(repoRoot, 'dist'),
  shards: 1,
  routers: 0,
  pgPort: await freePort(),
  fresh: true,
  ports: { config: await freePort(), router: [], shard: [await freePort()] },
  databasePrefix: 'bench',
  env: { TESSERA_LOG_LEVEL: 'warn', TESSERA_VIEWER_TOKEN: TOKEN },
  onProgress: (message) => console.log(`  ${message}`),
});
const deliveries = new Deliveries();
const graphqlClients: Client[] = [];
const sockets: Socket[] = [];

async function addSubscribers(count: number, via: 'graphql' | 'socketio'): Promise<void> {
  const url = cluster.configUrl;
  const ready: Array<Promise<void>> = [];
  for (let i = 0; i < count; i++) {
    if (via === 'graphql') {
      const client = createClient({
        url: `${url.replace('http', 'ws')}/graphql`,
        webSocketImpl: WebSocket,
        connectionParams: { authorization: TOKEN },
        lazy: false,
        retryAttempts: 0,
      });
      graphqlClients.push(client);
      ready.push(new Promise<void>((resolve) => client.on('connected', () => resolve())));
      client.subscribe<{ chunkPlacementChanged: { after: Array<{ min: [number] }> } }>(
        { query: `subscription { chunkPlacementChanged(ns: "${NS}") { after { min } } }` },
        {
          next: (value) => deliveries.arrived(value.data!.chunkPlacementChanged.after[1]!.min[0], 'graphql'),
          error: (error) => console.error('graphql-ws subscription failed', error),
          complete: () => undefined,
        },
      );
    } else {
      const socket = io(`${url}/events`, { auth: { token: TOKEN }, transports: ['websocket'], reconnection: false });
      sockets.push(socket);
      socket.on('event', (event: { details: { after: Array<{ range: { min: [number] } }> } }) =>
        deliveries.arrived(event.details.after[1]!.range.min[0], 'socketio'),
      );
      ready.push(socket.emitWithAck('subscribe', { rooms: [`ns:${NS}`] }).then(() => undefined));
    }
  }
  await Promise.all(ready);
}

try {
  console.log('bench:events — starting a local cluster (1 config server, 1 shard)');
  await cluster.start();
  const config = cluster.configClient();
  for (let i = 0; i < 50 && !(await config.leader()).self.isLeader; i++) await new Promise((r) => setTimeout(r, 100));
  await config.enableSharding({ db: 'bench' });
  await config.shardCollection({ ns: NS, key: { k: 1 } });
  let cv: ChunkVersion = (await config.getCollection(NS)).collectionVersion;
  let low: unknown[] = [{ $minKey: 1 }];
  let next = 0;

  /** Splits the top chunk at the next key and waits until every subscriber has it. */
  const split = async (subscribers: number) => {
    const k = ++next;
    const started = performance.now();
    const delivered = deliveries.expect(k, subscribers);
    const result = await config.commitSplit({
      ns: NS,
      expectedCollectionVersion: cv,
      shard: 'shard0',
      range: { min: low, max: [{ $maxKey: 1 }] },
      splitPoints: [[k]],
    });
    deliveries.commits.push(performance.now() - started);
    cv = result.collectionVersion;
    low = [k];
    await delivered;
  };

  /** Runs `events` splits with `graphql` + `socketio` subscribers connected, then disconnects them; answers the worst p99. */
  const run = async (label: string, events: number, counts: { graphql: number; socketio: number }) => {
    await addSubscribers(counts.graphql, 'graphql');
    await addSubscribers(counts.socketio, 'socketio');
    const total = counts.graphql + counts.socketio;
    // Untimed: warms up, and proves every subscription is live (graphql-ws acknowledges only connections).
    await split(total);
    deliveries.reset();
    for (let i = 0; i < events; i++) await split(total);
    const p99s: number[] = [];
    for (const via of ['graphql', 'socketio'] as const) {
      if (counts[via] === 0) continue;
      const sorted = [...deliveries.latencies[via]].sort((a, b) => a - b);
      p99s.push(percentile(sorted, 99));
      console.log(
        `${label.padEnd(36)} ${via.padEnd(9)} p50 ${percentile(sorted, 50).toFixed(2).padStart(7)} ms   p99 ${percentile(sorted, 99).toFixed(2).padStart(7)} ms   (${sorted.length} deliveries)`,
      );
    }
    const commits = [...deliveries.commits].sort((a, b) => a - b);
    console.log(
      `${''.padEnd(36)} the commit call alone: p50 ${percentile(commits, 50).toFixed(2)} ms, p99 ${percentile(commits, 99).toFixed(2)} ms`,
    );
    await Promise.all(graphqlClients.splice(0).map((c) => c.dispose()));
    for (const socket of sockets.splice(0)) socket.disconnect();
    return Math.max(...p99s);
  };

  console.log(`\nbench:events — latency from issuing a split commit to delivery, ${EVENTS} events, one at a time\n`);
  const worst: Record<string, number> = {};
  for (const n of [1, 100]) {
    worst[`graphql@${n}`] = await run(`${n} graphql-ws subscriber(s)`, EVENTS, { graphql: n, socketio: 0 });
    worst[`socketio@${n}`] = await run(`${n} socket.io client(s)`, EVENTS, { graphql: 0, socketio: n });
  }
  const p99at100 = Math.max(worst['graphql@100']!, worst['socketio@100']!);
  console.log(
    `\ngoal p99 <= 50 ms at 100 subscribers: ${p99at100 <= 50 ? 'met' : 'NOT met'} (worst transport p99 ${p99at100.toFixed(1)} ms)`,
  );

  console.log(`\nramp: ${RAMP_EVENTS} events at each size, half graphql-ws, half socket.io\n`);
  let served = p99at100 < 100 ? 100 : 0;
  let exceeded = false;
  for (const total of RAMP) {
    const p99 = await run(`${total} subscribers in all`, RAMP_EVENTS, { graphql: total / 2, socketio: total / 2 });
    if (p99 >= 100) {
      exceeded = true;
      break;
    }
    served = total;
  }
  console.log(
    `\none config process served ${exceeded ? '' : 'at least '}${served} concurrent subscribers with p99 < 100 ms${exceeded ? ' (the next size went over)' : ' (the largest size tried)'}`,
  );
} finally {
  await Promise.all(graphqlClients.map((c) => c.dispose()));
  for (const socket of sockets) socket.disconnect();
  await cluster.stop();
  rmSync(dir, { recursive: true, force: true });
}
