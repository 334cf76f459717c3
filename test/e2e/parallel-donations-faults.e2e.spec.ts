import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConfigClient } from '@tessera/protocol';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';
import { FAST_CONFIG_ENV, eventually, waitForLeader } from './helpers.js';
import { RouterApi, migrationStateSettled, onShardDatabase, storedCount } from './router-api.js';
import { rootApi, startTestCluster } from './test-cluster.js';

/**
 * kill -9 of a donor serving two migrations of one collection at once, each to its own
 * recipient, then a restart: each migration finishes or is undone by its own decision, every
 * write the router acknowledged meanwhile is stored once, on the shard that owns it, and nothing
 * that was not written appears.
 */

const SHARDS = ['shard0', 'shard1', 'shard2'];
const DOCUMENTS = 1000;
const SPLIT = 500;
const PAUSE_MS = 4000;
/** Both donations pause at steady state (the recipients keep catching up): neither committed. */
const BOTH_STEADY = 'par.steady';
/**
 * The first donation to commit pauses right after its config commit, holding the collection's
 * critical section; the second waits at steady state for its turn.
 */
const ONE_COMMITTED = 'par.committed';

let cluster: LocalCluster;
let dispose: () => Promise<void>;
let config: ConfigClient;
let api: RouterApi;

beforeAll(async () => {
  ({ cluster, dispose } = await startTestCluster({
    shards: 3,
    routers: 1,
    env: {
      ...FAST_CONFIG_ENV,
      TESSERA_ORPHAN_CLEANUP_DELAY_SECS: '0',
      TESSERA_MIGRATION_RECORD_GRACE_MS: '1000',
      TESSERA_MIGRATION_RECONCILE_INTERVAL_MS: '500',
      TESSERA_FAILPOINTS: [
        `migration.donor.steady@${BOTH_STEADY}=${PAUSE_MS}`,
        `migration.donor.committed@${ONE_COMMITTED}=${PAUSE_MS}`,
      ].join(','),
    },
  }));
  config = cluster.configClient();
  api = rootApi(cluster);
  await waitForLeader(config);
  await config.updateSettings({ balancer: { mode: 'off' } });
}, 60_000);

afterAll(async () => {
  await api?.close();
  await dispose?.();
});

/** The donor's phase rows of `ns` for `phase`, one per migration that reached it. */
async function reached(ns: string, phase: string): Promise<number> {
  return onShardDatabase(cluster, 'config', async (pool) => {
    const rows = await pool.query(
      "SELECT DISTINCT details->>'migrationId' FROM changelog WHERE what = 'moveChunk.phase' AND ns = $1 AND details->>'phase' = $2",
      [ns, phase],
    );
    return rows.rows.length;
  });
}

/**
 * Inserts one document at a time, alternating between the two chunks, until `stop`; answers the
 * acknowledged ones and every one sent (one cut off by the kill may or may not have been applied).
 */
async function writeUntil(
  ns: string,
  stop: () => boolean,
): Promise<{ acknowledged: Array<{ _id: number; x: number }>; sent: Array<{ _id: number; x: number }> }> {
  const [db, coll] = ns.split('.');
  const acknowledged: Array<{ _id: number; x: number }> = [];
  const sent: Array<{ _id: number; x: number }> = [];
  for (let n = 0; !stop(); n++) {
    const doc = { _id: DOCUMENTS + n, x: n % 2 === 0 ? n % SPLIT : SPLIT + (n % SPLIT) };
    sent.push(doc);
    const answer = await api.call('POST', `/v1/${db}/${coll}/insert`, { documents: [doc] }).catch(() => undefined);
    if (answer?.status === 200 && (answer.json as { insertedCount?: number }).insertedCount === 1) acknowledged.push(doc);
    else await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return { acknowledged, sent };
}

describe('kill -9 of a donor serving two migrations of one collection', () => {
  it.each([
    { ns: BOTH_STEADY, when: 'both at steady state', committed: 0 },
    { ns: ONE_COMMITTED, when: 'one committed and the other waiting for its critical section', committed: 1 },
  ])(
    '$when: each ends by its own decision, every acknowledged write stored once',
    async ({ ns, committed }) => {
      const [db, coll] = ns.split('.');
      await config.shardCollection({ ns, key: { x: 1 } });
      const initial = Array.from({ length: DOCUMENTS }, (_, x) => ({ _id: x, x }));
      expect((await api.call('POST', `/v1/${db}/${coll}/insert`, { documents: initial })).json).toMatchObject({ insertedCount: DOCUMENTS });
      const { epoch, timestamp, chunks } = await config.getChunks({ ns });
      const donor = chunks[0]!.shard;
      await config.commitSplit({
        ns,
        expectedCollectionVersion: { epoch, timestamp },
        shard: donor,
        range: chunks[0]!.range,
        splitPoints: [[SPLIT]],
      });
      const [low, high] = SHARDS.filter((s) => s !== donor);

      let stop = false;
      const writes = writeUntil(ns, () => stop);
      const moves = [
        config.moveRange({ ns, min: { x: { $minKey: 1 } }, toShard: low! }),
        config.moveRange({ ns, min: { x: SPLIT }, toShard: high! }),
      ].map((m) => m.then(() => 'moved' as const).catch((error: unknown) => error));
      await eventually(async () => ((await reached(ns, 'steady')) === 2 ? true : undefined), 'both donations at steady state');
      if (committed > 0) await eventually(async () => ((await reached(ns, 'committed')) === 1 ? true : undefined), 'one committed');
      expect(await reached(ns, 'committed')).toBe(committed);

      await cluster.kill(donor);
      await cluster.restart(donor);
      const outcomes = await Promise.all(moves);
      await eventually(
        async () => ((await migrationStateSettled(cluster, SHARDS)) ? true : undefined),
        'every migration document finished',
        60_000,
      );
      // A few acknowledged writes after the restart, then the log is complete.
      const after = Date.now();
      await eventually(async () => (Date.now() - after > 1000 ? true : undefined), 'writes after the restart');
      stop = true;
      const { acknowledged, sent } = await writes;

      const placed = (await config.getChunks({ ns })).chunks;
      expect(placed.filter((c) => c.shard !== donor)).toHaveLength(committed);
      const found = (await api.findAll(ns, { filter: {} })) as Array<{ _id: number; x: number }>;
      console.log(
        `${ns}: ${acknowledged.length} writes acknowledged around the kill; outcomes ${outcomes.map((o) => (o === 'moved' ? o : (o as Error).message.slice(0, 80))).join(' | ')}`,
      );
      // Stored once each; every acknowledged write there; nothing that was not sent (a write the
      // kill cut off before its answer may or may not have been applied).
      const ids = new Set(found.map((d) => d._id));
      expect(found.length).toBe(ids.size);
      expect([...initial, ...acknowledged].filter((d) => !ids.has(d._id))).toEqual([]);
      const sentIds = new Set([...initial, ...sent].map((d) => d._id));
      expect(found.filter((d) => !sentIds.has(d._id))).toEqual([]);
      // Each shard stores exactly the documents of the chunks it owns: no orphan left, none lost.
      const ownerOf = (x: number) =>
        placed.find(
          (c) => (typeof c.range.min[0] !== 'number' || x >= c.range.min[0]) && (typeof c.range.max[0] !== 'number' || x < c.range.max[0]),
        )!.shard;
      for (const shard of SHARDS) {
        expect(await storedCount(cluster, shard, ns), shard).toBe(found.filter((d) => ownerOf(d.x) === shard).length);
      }
    },
    150_000,
  );
});
