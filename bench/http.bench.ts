import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { freePort } from '../tools/cluster/local-cluster.js';

/**
 * bench:http — requests per second of a minimal Nest app on Express and on Fastify, against a
 * bare Fastify server, on this machine. Each server runs in its own process; autocannon drives
 * it from this one with 50 connections, after a warm-up. This is the measurement behind the
 * choice of HTTP platform (see README, "Architecture").
 */
const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 8);
const CONNECTIONS = 50;
const serverScript = fileURLToPath(new URL('./http-server.js', import.meta.url));

interface Result {
  platform: string;
  route: string;
  rps: number;
  p50: number;
  p99: number;
}

async function measure(platform: string): Promise<Result[]> {
  const port = await freePort();
  const child = fork(serverScript, [platform, String(port)], { stdio: 'inherit' });
  await new Promise<void>((resolve, reject) => {
    child.once('message', () => resolve());
    child.once('exit', (code) => reject(new Error(`${platform} server exited with ${code}`)));
  });
  const url = `http://127.0.0.1:${port}`;
  const results: Result[] = [];
  try {
    for (const [route, options] of [
      ['GET /ping', { url: `${url}/ping` }],
      ['POST /echo (200 B JSON)', { url: `${url}/echo`, method: 'POST' as const, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ payload: 'x'.repeat(180) }) }],
    ] as const) {
      await autocannon({ ...options, connections: CONNECTIONS, duration: 2 });
      const run = await autocannon({ ...options, connections: CONNECTIONS, duration: DURATION_S });
      if (run.non2xx > 0 || run.errors > 0) throw new Error(`${platform} ${route}: ${run.non2xx} non-2xx, ${run.errors} errors`);
      results.push({ platform, route, rps: run.requests.average, p50: run.latency.p50, p99: run.latency.p99 });
    }
  } finally {
    child.kill('SIGTERM');
  }
  return results;
}

const all: Result[] = [];
for (const platform of ['bare-fastify', 'express', 'fastify']) all.push(...(await measure(platform)));

console.log(`\nbench:http — ${CONNECTIONS} connections, ${DURATION_S} s per run, mean of per-second samples; server and load generator share the 2 cores\n`);
console.log('platform        route                      req/s     p50 ms  p99 ms  vs bare Fastify');
for (const r of all) {
  const bare = all.find((b) => b.platform === 'bare-fastify' && b.route === r.route)!;
  console.log(
    `${r.platform.padEnd(15)} ${r.route.padEnd(26)} ${r.rps.toFixed(0).padStart(7)}  ${String(r.p50).padStart(6)}  ${String(r.p99).padStart(6)}  ${(r.rps / bare.rps).toFixed(2)}`,
  );
}
for (const route of new Set(all.map((r) => r.route))) {
  const express = all.find((r) => r.platform === 'express' && r.route === route)!;
  const fastify = all.find((r) => r.platform === 'fastify' && r.route === route)!;
  console.log(`Nest on Fastify / Nest on Express, ${route}: ${(fastify.rps / express.rps).toFixed(2)}x`);
}
