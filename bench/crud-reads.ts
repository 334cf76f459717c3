import pg from 'pg';
import { request } from 'undici';
import { extractShardKey, percentile } from '@tessera/core';
import { type CollectionRoutingInfo, CatalogCache } from '@tessera/routing';
import { ShardClient, WireAgent } from '@tessera/protocol';
import { type CrudFixture, postJson } from './crud-fixture.js';
import type { CrudReport } from './crud-report.js';
import type { CrudSettings } from './crud-settings.js';
import { type ProcessCpu, machineBusyMillis } from './process-cpu.js';
import { isSteady } from './steady-state.js';

const NS = 'bench.docs100';

/** One way of reading a document by its shard key, and the meter of the processes it goes through. */
interface ReadWay {
  readonly what: string;
  readonly meter: ProcessCpu;
  readonly read: (k: number) => Promise<void>;
}

/** A way's warm-up so far: seconds spent, each window's p50, and its inverse as the window's score. */
interface ReadWarming {
  seconds: number;
  readonly p50s: number[];
  readonly speeds: number[];
}

/**
 * Point reads by shard key of `bench.docs100`: through the router, straight from the owning shard
 * (over the internal wire, as the router reads), and through the floor, once the work the inserts
 * left behind is over.
 */
export async function runReads(fixture: CrudFixture, settings: CrudSettings, report: CrudReport): Promise<void> {
  await settleBeforeReads(fixture, settings);
  const { cluster } = fixture.host;
  const info = await new CatalogCache(fixture.config).getCollectionRoutingInfo(NS);
  if (info.kind !== 'sharded') throw new Error('expected a sharded collection');
  const wire = new WireAgent({ clusterKey: cluster.clusterKey });
  try {
    const shards = new Map(
      (await fixture.config.listShards()).map((s) => [
        s.name,
        new ShardClient(s.url, { clusterKey: cluster.clusterKey, dispatcher: fixture.host.agent, wire }),
      ]),
    );
    const keys = Array.from({ length: settings.reads }, randomKey);
    const ways = readWays(fixture, info, shards);
    await warmUpInTurns(ways, settings, report);
    await measureInSlices(ways, keys, fixture, settings, report);
  } finally {
    await wire.close();
  }
}

/**
 * Autovacuum would visit every loaded table (it looks once a minute, so a quiet machine at the
 * start of the reads did not mean it was done: in one run it doubled the CPU per read of the
 * phase it landed in), so each database is vacuumed here; then a checkpoint writes out the dirty
 * pages, and the settling waits out the kernel's write-back.
 */
async function settleBeforeReads(fixture: CrudFixture, settings: CrudSettings): Promise<void> {
  const { cluster } = fixture.host;
  const vacuumStarted = performance.now();
  const databases = [
    ...['config', 'shard0', 'shard1', 'shard2'].map((name) => cluster.node(name).env.TESSERA_DATABASE_URL!),
    fixture.rawUrl,
  ];
  for (const url of databases) {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await client.query('VACUUM (ANALYZE)');
    } finally {
      await client.end();
    }
  }
  const vacuumSeconds = (performance.now() - vacuumStarted) / 1000;
  await fixture.raw.query('CHECKPOINT');
  const settled = await settle(settings);
  console.log(
    `  reads start after ${vacuumSeconds.toFixed(0)} s of VACUUM, a checkpoint and ${settled.seconds.toFixed(0)} s of settling: the machine's busy CPU fell to ${settled.rate.toFixed(0)} ms/s${settled.quiet ? '' : ` (NOT quiet: cut at ${settings.settleMaxSeconds} s)`}`,
  );
}

/**
 * Waits until the whole machine (kernel threads too: the write-back of what the inserts left)
 * is busy for less than `settleQuietMsPerSecond` over a window, or `settleMaxSeconds` have
 * passed; answers how long that took and the rate of the last window.
 */
async function settle(settings: CrudSettings): Promise<{ seconds: number; rate: number; quiet: boolean }> {
  const started = performance.now();
  for (;;) {
    const before = machineBusyMillis() ?? 0;
    await new Promise((resolve) => setTimeout(resolve, settings.settleWindowSeconds * 1000));
    const rate = ((machineBusyMillis() ?? 0) - before) / settings.settleWindowSeconds;
    const seconds = (performance.now() - started) / 1000;
    if (rate < settings.settleQuietMsPerSecond || seconds >= settings.settleMaxSeconds)
      return { seconds, rate, quiet: rate < settings.settleQuietMsPerSecond };
  }
}

/** The three ways, the router's first (the report gives it the goal). */
function readWays(
  fixture: CrudFixture,
  info: Extract<CollectionRoutingInfo, { kind: 'sharded' }>,
  shards: Map<string, ShardClient>,
): ReadWay[] {
  const { agent } = fixture.host;
  return [
    {
      what: 'via router',
      meter: fixture.cpu,
      read: async (k: number) => {
        const response = await request(`${fixture.router}/v1/bench/docs100/find`, {
          dispatcher: agent,
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ filter: { k } }),
        });
        await response.body.text();
      },
    },
    {
      what: 'from the shard',
      meter: fixture.cpu,
      read: async (k: number) => {
        const owner = info.table.chunkFor(extractShardKey(info.keyPattern, { k })).shard;
        await shards.get(owner)!.find({ ns: NS, shardVersion: info.table.shardVersion(owner), filter: { k } });
      },
    },
    {
      what: 'via floor',
      meter: fixture.floorCpu,
      read: async (k: number) => {
        const answer = await postJson<{ cursor: { firstBatch: unknown[] } }>(agent, `${fixture.relay.url}/find`, { filter: { k } });
        if (answer.cursor.firstBatch.length !== 1)
          throw new Error(`floor read of k=${k} found ${answer.cursor.firstBatch.length} documents`);
      },
    },
  ];
}

/**
 * The three ways warm up taking turns, a window each, until every one is steady and has read for
 * `readWarmupMinSeconds` (or `warmupMaxSeconds` of its own). Every way stays warm until it is
 * measured: any Node process here reads slower after a minute idle, and regains its speed only
 * over thousands of requests, so a way warmed up first and then left waiting would be measured
 * cold (the figures are in docs/benchmarks.md).
 */
async function warmUpInTurns(ways: readonly ReadWay[], settings: CrudSettings, report: CrudReport): Promise<void> {
  const warming: ReadWarming[] = ways.map(() => ({ seconds: 0, p50s: [], speeds: [] }));
  const isWarm = (way: ReadWarming) =>
    (isSteady(way.speeds) && way.seconds >= settings.readWarmupMinSeconds) || way.seconds >= settings.warmupMaxSeconds;
  while (!warming.every(isWarm)) {
    for (const [i, { read }] of ways.entries()) {
      const started = performance.now();
      const window = await latenciesOf(read, randomKeysFor(settings.windowSeconds));
      const p50 = percentile(
        window.sort((a, b) => a - b),
        50,
      );
      warming[i]!.seconds += (performance.now() - started) / 1000;
      warming[i]!.p50s.push(p50);
      warming[i]!.speeds.push(1 / p50);
    }
  }
  for (const [i, { what }] of ways.entries()) {
    const { seconds, p50s, speeds } = warming[i]!;
    report.recordWarmup(
      `point read ${what}`,
      seconds,
      speeds,
      p50s.map((p50) => `${p50.toFixed(2)} ms`),
    );
  }
}

/**
 * Reads `keys` with each way, in alternating slices of `keys`, so that none of them gets the
 * minutes right after the inserts and each the same share of whatever the machine does meanwhile.
 */
async function measureInSlices(
  ways: readonly ReadWay[],
  keys: readonly number[],
  fixture: CrudFixture,
  settings: CrudSettings,
  report: CrudReport,
): Promise<void> {
  const sliceLength = Math.ceil(settings.reads / settings.readSlices);
  const latencies = ways.map(() => [] as number[]);
  const spent = ways.map(() => new Map<string, number | undefined>());
  const backgroundBefore = await fixture.background.snapshot();
  for (let from = 0; from < settings.reads; from += sliceLength) {
    for (const [i, { read, meter }] of ways.entries()) {
      const before = meter.snapshot();
      latencies[i]!.push(...(await latenciesOf(read, keys.slice(from, from + sliceLength))));
      for (const [group, ms] of meter.since(before)) spent[i]!.set(group, ms === undefined ? undefined : (spent[i]!.get(group) ?? 0) + ms);
    }
  }
  const meanwhile = await fixture.background.since(backgroundBefore);
  for (const [i, { what }] of ways.entries()) {
    report.cpuRows.push({ what: `point read ${what}`, per: 'read', spent: spent[i]!, count: latencies[i]!.length, meanwhile });
    report.reads.push({ what, latencies: latencies[i]!, sliceLength });
  }
}

/** Answers the latency of each read of `ks`, made one after the other. */
async function latenciesOf(read: (k: number) => Promise<void>, ks: Iterable<number>): Promise<number[]> {
  const latencies: number[] = [];
  for (const k of ks) {
    const started = performance.now();
    await read(k);
    latencies.push(performance.now() - started);
  }
  return latencies;
}

const randomKey = () => Math.floor(Math.random() * 10_000);

/** Random keys, for `seconds` from when the first is taken. */
function* randomKeysFor(seconds: number): Generator<number> {
  const until = performance.now() + seconds * 1000;
  while (performance.now() < until) yield randomKey();
}
