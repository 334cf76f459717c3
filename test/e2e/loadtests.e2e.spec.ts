import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { ConfigClient } from '@tessera/protocol';
import {
  GRAPHQL_TRANSPORT_WS,
  GraphqlWsProtocol,
  OPERATIONS,
  type PlacementChange,
  type Sequence,
  type SetupData,
  type WorkloadOptions,
  addShard,
  collectReport,
  collectionSpecOf,
  graphqlData,
  graphqlWsUrl,
  insertBatch,
  judgeAnswer,
  parseWorkloadOptions,
  routerHeaders,
  seededRandom,
  setupCollection,
} from '../../loadtests/lib/index.ts';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';
import { runSequence } from './k6-sequence-driver.js';
import { FAST_CONFIG_ENV, eventually, waitForLeader } from './helpers.js';
import { startTestCluster } from './test-cluster.js';

// The k6 workloads' logic (loadtests/lib) driven from Node against real processes: the same setup
// and teardown sequences and insert batches the insert-random script sends with k6/http, sent
// here with fetch, and the subscriptions workload's graphql-ws protocol over the `ws` package.
// It checks that what teardown would report is what the cluster says.

let cluster: LocalCluster;
let dispose: () => Promise<void>;
let config: ConfigClient;
let catalog: pg.Pool;
let options: WorkloadOptions;

beforeAll(async () => {
  ({ cluster, dispose } = await startTestCluster({
    shards: 2,
    // shard2: running, not a member, for add-shard-under-load.
    spareShards: 1,
    env: { ...FAST_CONFIG_ENV, TESSERA_BALANCER_ROUND_INTERVAL_MS: '500', TESSERA_ORPHAN_CLEANUP_DELAY_SECS: '0' },
  }));
  config = cluster.configClient();
  catalog = new pg.Pool({ connectionString: cluster.node('config').env.TESSERA_DATABASE_URL, max: 2 });
  await waitForLeader(config);
  options = parseWorkloadOptions('insert-random', {
    ROUTER_URL: cluster.routerUrls[0],
    CONFIG_URL: cluster.configUrl,
    ADMIN_TOKEN: cluster.controlPlaneTokens.admin,
    API_KEY: cluster.rootKey,
    CHUNK_SIZE: '64KiB',
    DOC_BYTES: '1024',
    BATCH: '20',
    VUS: '4',
    // Long enough for the balancer to reach compliance on a busy CI machine (about 18 s here).
    SETTLE: '45s',
  });
});

afterAll(async () => {
  await catalog?.end();
  await dispose?.();
});

/** The Node driver of a lib sequence (see k6-sequence-driver.ts). */
function run<T>(sequence: Sequence<T>): Promise<T> {
  return runSequence(options, sequence);
}

/** One subscriber of the subscriptions workload: the lib's protocol over `ws`, collecting placement changes. */
function subscribe(ns: string, since: number): { received: PlacementChange[]; acknowledged: Promise<void>; close: () => void } {
  const received: PlacementChange[] = [];
  const protocol = new GraphqlWsProtocol(cluster.controlPlaneTokens.viewer);
  const socket = new WebSocket(graphqlWsUrl(options.configUrl), GRAPHQL_TRANSPORT_WS);
  const acknowledged = new Promise<void>((resolve, reject) => {
    socket.on('open', () => {
      for (const message of [
        ...protocol.open(),
        ...protocol.subscribe({ id: 'p', query: OPERATIONS.chunkPlacementChanged, variables: { ns, since } }),
      ])
        socket.send(message);
    });
    socket.on('message', (raw: Buffer) => {
      const reaction = protocol.receive(raw.toString());
      for (const message of reaction.send) socket.send(message);
      for (const event of reaction.events) {
        if (event.kind === 'acknowledged') resolve();
        if (event.kind === 'data') received.push((event.data as { chunkPlacementChanged: PlacementChange }).chunkPlacementChanged);
        if (event.kind === 'error') reject(new Error(event.message));
      }
    });
    socket.on('close', (code) => reject(new Error(`closed with ${code} before connection_ack`)));
  });
  return { received, acknowledged, close: () => socket.close() };
}

/**
 * A workload's insert scenario: `vus` virtual users sending one batch per iteration, the
 * iteration number shared as k6's scenario.iterationInTest is, until `stop()` or `capMs`.
 */
async function insertUntil(
  workload: 'insert-random' | 'add-shard-under-load',
  settings: WorkloadOptions,
  stop: () => boolean,
  capMs: number,
): Promise<{ batches: number; inserted: number; failures: string[]; ms: number }> {
  const random = seededRandom(20261123);
  const started = Date.now();
  let batches = 0;
  let inserted = 0;
  const failures: string[] = [];
  await Promise.all(
    Array.from({ length: settings.vus }, async () => {
      while (!stop() && Date.now() - started < capMs) {
        const request = insertBatch(workload, settings, batches++, random);
        const response = await fetch(`${settings.routerUrl}${request.path}`, {
          method: 'POST',
          headers: routerHeaders(settings),
          body: JSON.stringify(request.body),
        });
        const verdict = judgeAnswer(request, response.status, await response.json());
        if (verdict.ok) inserted += verdict.inserted ?? 0;
        else failures.push(verdict.problem ?? 'unknown');
      }
    }),
  );
  return { batches, inserted, failures, ms: Date.now() - started };
}

async function countDocuments(ns: string): Promise<number> {
  const [db, coll] = ns.split('.');
  const counted = await fetch(`${options.routerUrl}/v1/${db}/${coll}/count`, {
    method: 'POST',
    headers: routerHeaders(options),
    body: JSON.stringify({ filter: {} }),
  });
  return ((await counted.json()) as { n: number }).n;
}

async function changelogCount(ns: string, afterSeq: number, kinds: string[]): Promise<number> {
  const result = await catalog.query<{ n: string }>('SELECT count(*) AS n FROM changelog WHERE ns = $1 AND seq > $2 AND what = ANY($3)', [
    ns,
    afterSeq,
    kinds,
  ]);
  return Number(result.rows[0]!.n);
}

describe('the k6 workloads’ logic against a real cluster', () => {
  it('insert-random splits and migrates, and teardown reports the distribution, splits and migrations the cluster records', async () => {
    const setup: SetupData = await run(setupCollection(options, collectionSpecOf('insert-random', 2), () => Date.now()));
    expect(setup.shards).toEqual(['shard0', 'shard1']);
    // No auto-merger for this collection, so its chunk count is 1 + what the splits added.
    await run(
      (function* () {
        const answer = yield {
          kind: 'graphql' as const,
          request: {
            operation: 'noAutoMerger',
            query: 'mutation ($ns: String!) { configureCollectionBalancing(ns: $ns, enableAutoMerger: false) { ns } }',
            variables: { ns: setup.ns },
          },
        };
        return graphqlData('noAutoMerger', answer.status, answer.body);
      })(),
    );
    const subscriber = subscribe(setup.ns, setup.startSeq);
    await subscriber.acknowledged;

    // The insert-random scenario, until the subscriber has seen a migration commit (at most 30 s).
    const load = await insertUntil(
      'insert-random',
      options,
      () => subscriber.received.some((c) => c.reason === 'moveChunk.commit'),
      30_000,
    );
    const { batches: iteration, inserted, ms: loadMs } = load;
    expect(load.failures).toEqual([]);

    const report = await run(collectReport(options, setup, { compliant: true }, () => Date.now()));
    console.log(
      `loadtests e2e: ${iteration} batches (${inserted} documents, ${((inserted * options.docBytes) / 1e6).toFixed(1)} MB) in ${loadMs} ms; ` +
        `first split after ${report.firstSplitAfterMs} ms, first migration after ${report.firstMigrationAfterMs} ms; ` +
        `${report.splits} splits, ${report.migrations} migrations; ${report.chunks} chunks ${JSON.stringify(report.perShard.map((d) => [d.shard, d.chunks]))}; ` +
        `compliant ${report.compliant} ${report.settledAfterMs === null ? 'never' : `${report.settledAfterMs} ms`} after the load`,
    );

    // What teardown reports is what the cluster says: chunks per shard from the catalog's
    // routing table, splits and migrations from its changelog.
    const chunks = (await config.getChunks({ ns: setup.ns })).chunks;
    const perShard = (shard: string) => chunks.filter((c) => c.shard === shard).length;
    expect(report.chunks).toBe(chunks.length);
    expect(report.perShard.map((d) => [d.shard, d.chunks])).toEqual([
      ['shard0', perShard('shard0')],
      ['shard1', perShard('shard1')],
    ]);
    expect(report.splits).toBe(await changelogCount(setup.ns, setup.startSeq, ['split', 'multi-split']));
    expect(report.migrations).toBe(await changelogCount(setup.ns, setup.startSeq, ['moveChunk.commit']));
    expect(report.splits).toBeGreaterThan(0);
    expect(report.migrations).toBeGreaterThan(0);
    // The collection started as one chunk and nothing merged: every chunk but one came from a split.
    expect(report.chunks).toBe(1 + report.chunksAddedBySplits);
    expect(report.shardsWithChunks).toBe(2);
    expect(report.firstSplitAfterMs).not.toBeNull();
    expect(report.firstSplitAfterMs!).toBeLessThan(loadMs);
    // Settled: the balancer called it compliant (so no migration was still to come while the
    // counts above were read), and still does.
    expect(report.compliant).toBe(true);
    expect(report.settledAfterMs).not.toBeNull();
    expect((await config.balancerCollectionStatus(setup.ns)).balancerCompliant).toBe(true);

    // The subscriber got every placement change of the run, once, in seq order: the same seqs
    // as the changelog's splits and migration commits.
    const logged = await catalog.query<{ seq: string }>(
      "SELECT seq FROM changelog WHERE ns = $1 AND seq > $2 AND what IN ('split', 'multi-split', 'moveChunk.commit') ORDER BY seq",
      [setup.ns, setup.startSeq],
    );
    const expected = logged.rows.map((r) => Number(r.seq));
    const receivedSeqs = () => subscriber.received.filter((c) => c.reason !== 'merge').map((c) => c.seq);
    await eventually(
      async () => (receivedSeqs().length >= expected.length ? true : undefined),
      'every split and migration on graphql-ws',
      10_000,
    );
    subscriber.close();
    expect(receivedSeqs()).toEqual(expected);
    expect(expected).toHaveLength(report.splits + report.migrations);

    // Nothing acknowledged was lost on the way.
    expect(await countDocuments(setup.ns)).toBe(inserted);
  }, 120_000);

  it('add-shard-under-load: a shard added during the inserts gets chunks, and not one request fails', async () => {
    const settings = parseWorkloadOptions('add-shard-under-load', {
      ROUTER_URL: options.routerUrl,
      CONFIG_URL: options.configUrl,
      ADMIN_TOKEN: options.adminToken,
      API_KEY: options.apiKey,
      CHUNK_SIZE: '64KiB',
      DOC_BYTES: '1024',
      BATCH: '20',
      VUS: '4',
      SETTLE: '20s',
      NEW_SHARD_NAME: 'shard2',
      NEW_SHARD_URL: cluster.node('shard2').url,
    });
    const setup = await run(setupCollection(settings, collectionSpecOf('add-shard-under-load', 2), () => Date.now()));
    expect(setup.shards).toEqual(['shard0', 'shard1']);

    // The addShard scenario: one call, part-way through the load (1.5 s in); then the load goes
    // on until the new shard owns a chunk of the collection (at most 40 s).
    let newShardHoldsChunks = false;
    let added: { name: string; state: string } | undefined;
    const adding = (async () => {
      await new Promise((resolve) => setTimeout(resolve, 1500));
      added = await run(addShard(settings.newShardName, settings.newShardUrl));
      while (!newShardHoldsChunks) {
        await new Promise((resolve) => setTimeout(resolve, 300));
        newShardHoldsChunks = (await config.getChunks({ ns: setup.ns })).chunks.some((c) => c.shard === 'shard2');
      }
    })();
    const load = await insertUntil('add-shard-under-load', settings, () => newShardHoldsChunks, 40_000);
    newShardHoldsChunks = true;
    await adding;
    expect(added).toMatchObject({ name: 'shard2' });
    expect(load.failures).toEqual([]);

    // The continuous scheduler goes on balancing: stop it, so that the report's counts and the
    // changelog's below are of the same migrations.
    await config.updateSettings({ balancer: { mode: 'off' } });
    await eventually(async () => {
      const status = await config.balancerStatus();
      return !status.inBalancerRound && status.throttle.migrationsInFlight === 0 ? true : undefined;
    }, 'the balancer to stop');
    const report = await run(collectReport(settings, setup, { shardHoldsChunks: 'shard2' }, () => Date.now()));
    await config.updateSettings({ balancer: { mode: 'full' } });
    console.log(
      `loadtests e2e (add shard): ${load.inserted} documents in ${load.ms} ms, no failure; shard2 holds ${report.watchedShardChunks} chunks; ` +
        `${report.splits} splits, ${report.migrations} migrations; ${JSON.stringify(report.perShard.map((d) => [d.shard, d.chunks]))}; ` +
        `load throttle ${JSON.stringify(report.throttle)}`,
    );
    const chunks = (await config.getChunks({ ns: setup.ns })).chunks;
    // The continuous scheduler (the default) recorded the load throttle's decision with each round that issued.
    expect(report.throttle.roundsDecided).toBeGreaterThan(0);
    expect(['fullSpeed', 'throttled']).toContain(report.throttle.lastState);
    expect(report.watchedShard).toBe('shard2');
    expect(report.watchedShardChunks).toBe(chunks.filter((c) => c.shard === 'shard2').length);
    expect(report.watchedShardChunks).toBeGreaterThan(0);
    expect(report.settledAfterMs).not.toBeNull();
    expect(report.perShard.map((d) => d.shard)).toEqual(['shard0', 'shard1', 'shard2']);
    expect(report.migrations).toBe(await changelogCount(setup.ns, setup.startSeq, ['moveChunk.commit']));
    expect(await countDocuments(setup.ns)).toBe(load.inserted);
  }, 90_000);
});
