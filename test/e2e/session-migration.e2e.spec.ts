/**
 * Session migration on real processes: the retry history of a chunk's documents moves with the
 * chunk, so a retryable write acknowledged by the donor and retried after the chunk moved is
 * answered by the recipient from the migrated history, not run again. That holds for history
 * recorded before the migration and for history recorded while it ran (pulled again inside the
 * critical section).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MoveRangeResult } from '@tessera/protocol';
import { FAST_CONFIG_ENV, eventually } from './helpers.js';
import { onShardDatabase } from './router-api.js';
import { type RoutedTestCluster, startRoutedTestCluster } from './test-cluster.js';

const NS = 'smig.counters';
const PATH = '/v1/smig/counters';
/** The donor pauses in steady state for this long, so that the test can write while the migration runs. */
const STEADY_PAUSE_MS = 3000;

let t: RoutedTestCluster;

beforeAll(async () => {
  t = await startRoutedTestCluster({
    shards: 2,
    env: { ...FAST_CONFIG_ENV, TESSERA_FAILPOINTS: `migration.donor.steady@${NS}=${STEADY_PAUSE_MS}` },
  });
  await t.config.enableSharding({ db: 'smig', primaryShard: 'shard0' });
  await t.config.shardCollection({ ns: NS, key: { x: 1 } });
  await t.api.insertMany(
    NS,
    Array.from({ length: 40 }, (_, x) => ({ _id: x, x, n: 0 })),
  );
});

afterAll(async () => {
  await t?.stop();
});

const session = () => ({ id: { $uuid: randomUUID() } });

async function counters(): Promise<Map<number, number>> {
  const documents = (await t.api.findAll(NS, { filter: {} })) as Array<{ x: number; n: number }>;
  return new Map(documents.map((d) => [d.x, d.n]));
}

async function reachedPhase(phase: string): Promise<boolean> {
  return onShardDatabase(t.cluster, 'config', async (pool) => {
    const rows = await pool.query("SELECT 1 FROM changelog WHERE what = 'moveChunk.phase' AND ns = $1 AND details->>'phase' = $2", [
      NS,
      phase,
    ]);
    return rows.rows.length > 0;
  });
}

describe('session migration', () => {
  // x 0-9 move to shard1; x 10-19 stay on shard0.
  const batch = { updates: Array.from({ length: 20 }, (_, x) => ({ q: { x }, u: { $inc: { n: 1 } } })), lsid: session(), txnNumber: 7 };
  const findAndModify = { query: { x: 5 }, update: { $inc: { n: 10 } }, new: true, lsid: session(), txnNumber: 3 };
  const duringMigration = { updates: [{ q: { x: 8 }, u: { $inc: { n: 100 } } }], lsid: session(), txnNumber: 1 };
  let moved: MoveRangeResult;

  beforeAll(async () => {
    expect((await t.api.call('POST', `${PATH}/update`, batch)).json).toMatchObject({ matchedCount: 20, modifiedCount: 20 });
    const first = await t.api.call('POST', `${PATH}/findAndModify`, findAndModify);
    expect(first.json).toMatchObject({ value: { _id: 5, x: 5, n: 11 } });

    const migration = t.config.moveRange({ ns: NS, min: { x: 0 }, max: { x: 10 }, toShard: 'shard1' });
    migration.catch(() => undefined);
    await eventually(async () => ((await reachedPhase('steady')) ? true : undefined), 'the migration to reach steady state');
    // Acknowledged by the donor after the recipient's first pull of the history.
    const during = await t.api.call('POST', `${PATH}/update`, duringMigration);
    expect(during.json).toMatchObject({ matchedCount: 1, modifiedCount: 1 });
    expect(await reachedPhase('criticalSection')).toBe(false);
    moved = await migration;
  });

  it('moves the chunk, and its history with it', async () => {
    expect(moved).toMatchObject({ donor: 'shard0', recipient: 'shard1', documentsCloned: 10 });
    const migrated = await onShardDatabase(t.cluster, 'shard1', async (pool) => {
      const rows = await pool.query<{ n: string }>('SELECT coalesce(sum(cardinality(stmt_ids)), 0) AS n FROM txn_records');
      return Number(rows.rows[0]!.n);
    });
    // Statements 0-9 of the batch, the findAndModify and the write during the migration.
    expect(migrated).toBe(12);
  });

  it('a retried $inc batch is answered from history on both shards and applies each $inc once', async () => {
    const retry = await t.api.call('POST', `${PATH}/update`, batch);
    expect(retry.status).toBe(200);
    expect(retry.json).toMatchObject({ matchedCount: 20, modifiedCount: 20, writeErrors: [] });
    expect([...(retry.json.retriedStmtIds as number[])].sort((a, b) => a - b)).toEqual(batch.updates.map((_, i) => i));
  });

  it("a retried findAndModify answers the first execution's image from the recipient", async () => {
    const retry = await t.api.call('POST', `${PATH}/findAndModify`, findAndModify);
    expect(retry.status).toBe(200);
    expect(retry.json).toMatchObject({ value: { _id: 5, x: 5, n: 11 }, lastErrorObject: { n: 1, updatedExisting: true } });
  });

  it('a write acknowledged by the donor while the migration ran is answered from history after it', async () => {
    const retry = await t.api.call('POST', `${PATH}/update`, duringMigration);
    expect(retry.json).toMatchObject({ matchedCount: 1, modifiedCount: 1, retriedStmtIds: [0] });
  });

  it('every counter was incremented once', async () => {
    const after = await counters();
    for (let x = 0; x < 20; x++) expect(after.get(x)).toBe(1 + (x === 5 ? 10 : 0) + (x === 8 ? 100 : 0));
    for (let x = 20; x < 40; x++) expect(after.get(x)).toBe(0);
  });
});
