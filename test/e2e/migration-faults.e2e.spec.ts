import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConfigClient } from '@tessera/protocol';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';
import { FAST_CONFIG_ENV, eventually, waitForLeader } from './helpers.js';
import { RouterApi, migrationStateSettled, onShardDatabase, storedCount } from './router-api.js';
import { rootApi, startTestCluster } from './test-cluster.js';

/**
 * kill -9 of the donor, the recipient or the config server at each phase of a migration, then a
 * restart: the persisted documents must finish or undo the migration, leaving the data whole,
 * stored once on the shard that owns it, and no migration state behind.
 */

const PHASES = {
  /** The recipient pauses after its first cloned batch. */
  cloning: { failpoint: 'migration.recipient.firstCloneBatch', reached: 'cloning' },
  /** The donor pauses at steady state, while the recipient keeps catching up. */
  catchup: { failpoint: 'migration.donor.steady', reached: 'steady' },
  /** The donor pauses inside its critical section, before the recipient commits. */
  criticalSection: { failpoint: 'migration.donor.criticalSection', reached: 'criticalSection' },
  /** The donor pauses after the config commit, before it releases anything. */
  committed: { failpoint: 'migration.donor.committed', reached: 'committed' },
  /** The donor's range deleter pauses after its first batch. */
  rangeDeletion: { failpoint: 'rangeDeleter.firstBatch', reached: 'rangeDeletionScheduled' },
} as const;
type Phase = keyof typeof PHASES;
const VICTIMS = ['donor', 'recipient', 'config'] as const;
type Victim = (typeof VICTIMS)[number];

const DOCUMENTS = 1000;
const PAUSE_MS = 3000;
const nsOf = (phase: Phase, victim: Victim) => `fault.${phase}_${victim}`;

let cluster: LocalCluster;
let dispose: () => Promise<void>;
let config: ConfigClient;
let api: RouterApi;

beforeAll(async () => {
  const failpoints = Object.entries(PHASES).flatMap(([phase, { failpoint }]) =>
    VICTIMS.map((victim) => `${failpoint}@${nsOf(phase as Phase, victim)}=${PAUSE_MS}`),
  );
  ({ cluster, dispose } = await startTestCluster({
    shards: 2,
    routers: 1,
    env: {
      ...FAST_CONFIG_ENV,
      TESSERA_ORPHAN_CLEANUP_DELAY_SECS: '0',
      TESSERA_MIGRATION_CLONE_BATCH_DOCUMENTS: '200',
      TESSERA_RANGE_DELETER_BATCH_SIZE: '100',
      TESSERA_MIGRATION_RECORD_GRACE_MS: '1000',
      TESSERA_MIGRATION_RECONCILE_INTERVAL_MS: '500',
      TESSERA_FAILPOINTS: failpoints.join(','),
    },
  }));
  config = cluster.configClient();
  api = rootApi(cluster);
  await waitForLeader(config);
}, 60_000);

afterAll(async () => {
  await api?.close();
  await dispose?.();
});

async function reachedPhase(ns: string, phase: string): Promise<boolean> {
  return onShardDatabase(cluster, 'config', async (pool) => {
    const rows = await pool.query("SELECT 1 FROM changelog WHERE what = 'moveChunk.phase' AND ns = $1 AND details->>'phase' = $2", [
      ns,
      phase,
    ]);
    return rows.rows.length > 0;
  });
}

/** How many of the documents (x = 0..DOCUMENTS-1) fall in the chunks each shard owns, per the config server. */
async function ownedCounts(ns: string): Promise<Record<string, number>> {
  const counts: Record<string, number> = { shard0: 0, shard1: 0 };
  for (const chunk of (await config.getChunks({ ns })).chunks) {
    const lo = typeof chunk.range.min[0] === 'number' ? chunk.range.min[0] : -Infinity;
    const hi = typeof chunk.range.max[0] === 'number' ? chunk.range.max[0] : Infinity;
    counts[chunk.shard]! += Array.from({ length: DOCUMENTS }, (_, x) => x).filter((x) => x >= lo && x < hi).length;
  }
  return counts;
}

describe.each(Object.keys(PHASES) as Phase[])('kill -9 during %s', (phase) => {
  it.each(VICTIMS)('of the %s: the migration finishes or is undone, the data whole and stored once', async (victim) => {
    const ns = nsOf(phase, victim);
    const [db, coll] = ns.split('.');
    await config.shardCollection({ ns, key: { x: 1 } });
    const documents = Array.from({ length: DOCUMENTS }, (_, x) => ({ _id: x, x, v: `value ${x}` }));
    const inserted = await api.call('POST', `/v1/${db}/${coll}/insert`, { documents });
    expect(inserted.json).toMatchObject({ insertedCount: DOCUMENTS });
    const donor = (await config.getChunks({ ns })).chunks[0]!.shard;
    const recipient = donor === 'shard0' ? 'shard1' : 'shard0';
    const names: Record<Victim, string> = { donor, recipient, config: 'config' };

    const moving = config.moveRange({ ns, min: { x: { $minKey: 1 } }, toShard: recipient }).catch((error: unknown) => error);
    await eventually(async () => ((await reachedPhase(ns, PHASES[phase].reached)) ? true : undefined), `phase ${phase}`);
    if (phase === 'rangeDeletion') {
      await eventually(async () => ((await storedCount(cluster, donor, ns)) < DOCUMENTS ? true : undefined), 'the first deleted batch');
    }
    await cluster.kill(names[victim]);
    await cluster.restart(names[victim]);
    if (victim === 'config') await waitForLeader(config);
    await moving;

    await eventually(
      async () => ((await migrationStateSettled(cluster, ['shard0', 'shard1'])) ? true : undefined),
      'every migration document to be finished',
      30_000,
    );
    const found = (await api.findAll(ns, { filter: {} })) as Array<{ _id: number; x: number; v: string }>;
    expect(found).toHaveLength(DOCUMENTS);
    expect(new Set(found.map((d) => d._id)).size).toBe(DOCUMENTS);
    expect(found.every((d) => d.v === `value ${d.x}` && d._id === d.x)).toBe(true);
    const owned = await ownedCounts(ns);
    expect({ shard0: await storedCount(cluster, 'shard0', ns), shard1: await storedCount(cluster, 'shard1', ns) }).toEqual(owned);
  });
});
