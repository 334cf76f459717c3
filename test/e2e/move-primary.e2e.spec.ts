/**
 * movePrimary moves a database's unsharded collections under kill -9, on real processes: for
 * every phase of its coordinator, the donor (old primary), the recipient (new primary) and the
 * config leader are each killed while the coordinator is paused in that phase (a config
 * failpoint), and once more the recipient in the middle of its clone (a shard failpoint). A
 * writer inserts through the router all the while. Each move must finish, and then every
 * acknowledged insert is on the new primary exactly once, no document is there that was never
 * sent, the secondary index came along, the old primary keeps no copy, and no critical section
 * is left.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';
import { FAST_CONFIG_ENV, controlPlane, eventually, waitForLeader } from './helpers.js';
import { RouterApi, onShardDatabase, storedCount } from './router-api.js';
import { rootApi, startTestCluster } from './test-cluster.js';

const PHASES = ['prepare', 'clone', 'enterCriticalSection', 'commit', 'exitCriticalSection', 'clean'] as const;
const VICTIMS = ['donor', 'recipient', 'config'] as const;
type Victim = (typeof VICTIMS)[number];
const DONOR = 'shard0';
const RECIPIENT = 'shard1';
/** How long a config process pauses in the scenario's phase: the window the test kills in. */
const PHASE_PAUSE_MS = 2_500;
const PRELOADED = 250;
const CLONE_BATCH = 100;

const scenarios = [
  ...PHASES.flatMap((phase) => VICTIMS.map((victim) => ({ phase: phase as string, victim, db: `mp_${phase.toLowerCase()}_${victim}` }))),
  { phase: 'midClone', victim: 'recipient' as Victim, db: 'mp_midclone_recipient' },
];
const configFailpoints = scenarios
  .filter((s) => s.phase !== 'midClone')
  .map((s) => `ddl.movePrimary.${s.phase}@db:${s.db}=${PHASE_PAUSE_MS}`)
  .join(',');

let cluster: LocalCluster;
let dispose: () => Promise<void>;
let router: RouterApi;
let catalog: pg.Pool;

beforeAll(async () => {
  ({ cluster, dispose } = await startTestCluster({
    shards: 2,
    routers: 1,
    configs: 2,
    env: { ...FAST_CONFIG_ENV, TESSERA_MIGRATION_CLONE_BATCH_DOCUMENTS: String(CLONE_BATCH) },
    nodeEnv: {
      config: { TESSERA_FAILPOINTS: configFailpoints },
      config1: { TESSERA_FAILPOINTS: configFailpoints },
      [RECIPIENT]: { TESSERA_FAILPOINTS: `movePrimary.recipient.cloneBatch@mp_midclone_recipient.items=${PHASE_PAUSE_MS}` },
    },
  }));
  router = rootApi(cluster);
  catalog = new pg.Pool({ connectionString: cluster.node('config').env.TESSERA_DATABASE_URL, max: 2 });
  await waitForLeader(cluster.configClient());
}, 120_000);

afterAll(async () => {
  await router?.close();
  await catalog?.end();
  await dispose?.();
});

/** The config process leading now. */
async function leaderName(): Promise<string> {
  return eventually(async () => {
    for (const name of ['config', 'config1']) {
      const answer = await cluster
        .configClient(name)
        .leader()
        .catch(() => undefined);
      if (answer?.self.isLeader) return name;
    }
    return undefined;
  }, 'a config leader');
}

/** movePrimary sent to whichever config process leads, again after a failure: a repeated request joins the running coordinator. */
async function movePrimary(db: string): Promise<void> {
  for (;;) {
    const leader = await leaderName();
    try {
      await cluster.configClient(leader).movePrimary({ db, to: RECIPIENT });
      return;
    } catch (error) {
      if (!(error as { retryable?: boolean }).retryable) throw error;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
}

async function phaseOf(db: string): Promise<string | undefined> {
  const rows = await catalog.query<{ phase: string }>(
    "SELECT phase FROM ddl_coordinators WHERE kind = 'movePrimary' AND resource = $1 AND phase NOT IN ('done', 'failed')",
    [`db:${db}`],
  );
  return rows.rows[0]?.phase;
}

/** Inserts one document at a time until stopped, noting which were acknowledged and which ended in an error (outcome unknown). */
function startWriter(ns: string) {
  const acknowledged: string[] = [];
  const unknown: string[] = [];
  let stopped = false;
  const [db, coll] = ns.split('.');
  const done = (async () => {
    for (let i = 0; !stopped; i++) {
      const _id = `w${i}`;
      const answer = await router.call('POST', `/v1/${db}/${coll}/insert`, { documents: [{ _id, v: i }] }).catch(() => undefined);
      const ok = answer?.status === 200 && (answer.json.writeErrors as unknown[] | undefined)?.length === 0;
      (ok ? acknowledged : unknown).push(_id);
      if (!ok) await new Promise((resolve) => setTimeout(resolve, 50));
    }
  })();
  return {
    acknowledged,
    unknown,
    stop: async () => {
      stopped = true;
      await done;
    },
  };
}

async function kill(victim: Victim): Promise<string> {
  const name = victim === 'donor' ? DONOR : victim === 'recipient' ? RECIPIENT : await leaderName();
  await cluster.kill(name, 'SIGKILL');
  await cluster.restart(name);
  return name;
}

describe('movePrimary under kill -9', () => {
  it.each(scenarios)('finishes, losing and doubling nothing, when the $victim is killed in $phase', async ({ phase, victim, db }) => {
    const ns = `${db}.items`;
    await cluster.configClient(await leaderName()).enableSharding({ db, primaryShard: DONOR });
    await router.insertMany(
      ns,
      Array.from({ length: PRELOADED }, (_, i) => ({ _id: `p${i}`, v: -i })),
      PRELOADED,
    );
    expect((await router.call('POST', `/v1/${db}/items/indexes`, { indexes: [{ key: { v: 1 }, name: 'v_1' }] })).status).toBe(200);

    const writer = startWriter(ns);
    const moving = movePrimary(db);
    if (phase === 'midClone') {
      await eventually(
        async () => ((await storedCount(cluster, RECIPIENT, ns)) >= CLONE_BATCH ? true : undefined),
        'the first cloned batch',
      );
    } else {
      await eventually(async () => ((await phaseOf(db)) === phase ? true : undefined), `movePrimary of ${db} to reach ${phase}`);
    }
    await kill(victim);
    await moving;
    // Writes after the move go to the new primary.
    await eventually(async () => (writer.acknowledged.some((id) => Number(id.slice(1)) > 0) ? true : undefined), 'writes to go on');
    const settledCount = writer.acknowledged.length;
    await eventually(async () => (writer.acknowledged.length >= settledCount + 5 ? true : undefined), 'writes after the move');
    await writer.stop();

    expect((await cluster.configClient(await leaderName()).getDatabase(db)).primaryShard).toBe(RECIPIENT);
    const stored = (await router.findAll(ns, {})) as Array<{ _id: string }>;
    const ids = stored.map((d) => d._id);
    expect(new Set(ids).size, 'no document twice').toBe(ids.length);
    const sent = new Set([...Array.from({ length: PRELOADED }, (_, i) => `p${i}`), ...writer.acknowledged, ...writer.unknown]);
    expect(
      ids.filter((id) => !sent.has(id)),
      'no document that was never sent',
    ).toEqual([]);
    const present = new Set(ids);
    expect(
      [...Array.from({ length: PRELOADED }, (_, i) => `p${i}`), ...writer.acknowledged].filter((id) => !present.has(id)),
      'every acknowledged insert',
    ).toEqual([]);
    expect(await storedCount(cluster, RECIPIENT, ns)).toBe(ids.length);
    expect(await storedCount(cluster, DONOR, ns), 'no copy left on the old primary').toBe(0);
    const indexes = (await router.call('GET', `/v1/${db}/items/indexes`)).json as { cursor: { firstBatch: Array<{ name: string }> } };
    expect(indexes.cursor.firstBatch.map((i) => i.name)).toEqual(['_id_', 'v_1']);
    const sections = await onShardDatabase(
      cluster,
      DONOR,
      async (pool) => (await pool.query('SELECT db FROM database_critical_sections')).rows,
    );
    expect(sections).toEqual([]);
    // Its failpoints would pause every later move of it (the removeShard case moves what is left).
    await cluster.configClient(await leaderName()).dropDatabase({ db });
  });
});

describe('retryable writes across movePrimary', () => {
  it('answers a write retried at the new primary from the retry history that moved with the collection, without running it again', async () => {
    const db = 'mp_retry';
    await cluster.configClient(await leaderName()).enableSharding({ db, primaryShard: DONOR });
    await router.insertMany(`${db}.counters`, [{ _id: 'a', n: 0 }]);
    const lsid = { id: { $uuid: randomUUID() } };
    const body = { updates: [{ q: { _id: 'a' }, u: { $inc: { n: 1 } } }], lsid, txnNumber: 1 };
    const first = await router.call('POST', `/v1/${db}/counters/update`, body);
    expect(first.json).toMatchObject({ matchedCount: 1, modifiedCount: 1 });

    await movePrimary(db);
    const retry = await router.call('POST', `/v1/${db}/counters/update`, body);
    expect(retry.json).toMatchObject({ matchedCount: 1, modifiedCount: 1, retriedStmtIds: [0] });
    expect(await router.findAll(`${db}.counters`, {})).toEqual([{ _id: 'a', n: 1 }]);
    expect(await storedCount(cluster, RECIPIENT, `${db}.counters`)).toBe(1);

    // The control plane shows the operation with what its phases recorded.
    const { ddlOperations } = await controlPlane<{ ddlOperations: Array<Record<string, unknown>> }>(
      cluster.configUrl,
      cluster.controlPlaneTokens.viewer,
      '{ ddlOperations(recent: 50) { kind resource phase request state error } }',
    );
    expect(ddlOperations.find((o) => o.resource === `db:${db}`)).toMatchObject({
      kind: 'movePrimary',
      phase: 'done',
      request: { db, to: RECIPIENT },
      state: { from: DONOR, collections: [`${db}.counters`], documents: 1 },
      error: null,
    });
  });
});

describe('removeShard of a primary shard', () => {
  it('names the databases to move, and completes once movePrimary has taken them and their data away', async () => {
    const leader = async () => cluster.configClient(await leaderName());
    const started = await (await leader()).removeShard({ name: RECIPIENT });
    expect(started.state).toBe('started');
    const primaries = (await catalog.query<{ name: string }>('SELECT name FROM databases WHERE primary_shard = $1', [RECIPIENT])).rows.map(
      (r) => r.name,
    );
    expect(primaries.length).toBeGreaterThan(0);
    expect([...started.dbsToMove].sort()).toEqual([...primaries].sort());
    expect(started.note).toContain(`movePrimary needed for ${started.dbsToMove.join(', ')}`);

    const before = new Map<string, number>();
    for (const db of primaries) before.set(db, (await router.findAll(`${db}.items`, {})).length);
    for (const db of primaries) await (await leader()).movePrimary({ db, to: DONOR });
    const completed = await eventually(async () => {
      const answer = await (await leader()).removeShard({ name: RECIPIENT });
      return answer.state === 'completed' ? answer : undefined;
    }, `${RECIPIENT} to leave the cluster`);
    expect(completed.dbsToMove).toEqual([]);
    for (const db of primaries) {
      expect((await router.findAll(`${db}.items`, {})).length, db).toBe(before.get(db));
      expect(await storedCount(cluster, DONOR, `${db}.items`), db).toBe(before.get(db));
    }
  });
});
