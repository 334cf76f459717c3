/**
 * Retryable writes on real processes (issue 25): a write sent with an lsid and a txnNumber runs
 * once however often it is sent, through any router, across a router's kill -9 after the shards
 * committed and a shard's kill -9 and restart. Every check is against the log of writes the
 * cluster acknowledged: each document inserted once, each `$inc` applied once.
 */
import { randomUUID } from 'node:crypto';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConfigClient } from '@tessera/protocol';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';
import { FAST_CONFIG_ENV, eventually, waitForLeader } from './helpers.js';
import type { RouterApi } from './router-api.js';
import { rootApi, startTestCluster } from './test-cluster.js';

const NS = 'retry.counters';
const PATH = '/v1/retry/counters';
/** How long router0 holds an answer after its shards committed, so the test can kill it then. */
const HOLD_MS = 60_000;

let cluster: LocalCluster;
let dispose: () => Promise<void>;
let config: ConfigClient;
/** router0 holds every write answer to NS (failpoint); router1 answers at once. */
let held: RouterApi;
let router1: RouterApi;

beforeAll(async () => {
  ({ cluster, dispose } = await startTestCluster({
    shards: 2,
    routers: 2,
    env: FAST_CONFIG_ENV,
    nodeEnv: { router0: { TESSERA_FAILPOINTS: `router.write.beforeReply@${NS}=${HOLD_MS}` } },
  }));
  config = cluster.configClient();
  await waitForLeader(config);
  held = rootApi(cluster);
  router1 = rootApi(cluster, 1);
  await config.enableSharding({ db: 'retry', primaryShard: 'shard0' });
  await config.shardCollection({ ns: NS, key: { _id: 'hashed' } });
  await router1.insertMany(
    NS,
    Array.from({ length: 20 }, (_, i) => ({ _id: i, n: 0 })),
  );
});

afterAll(async () => {
  await held?.close();
  await router1?.close();
  await dispose?.();
});

const session = () => ({ id: { $uuid: randomUUID() } });

/** Every counter document, by `_id`. */
async function counters(): Promise<Map<unknown, number>> {
  const documents = (await router1.findAll(NS, { filter: {} })) as Array<{ _id: unknown; n: number }>;
  return new Map(documents.map((d) => [d._id, d.n]));
}

/**
 * Sends `body` to router0, waits until `committed` sees its effect through router1, kills router0
 * with SIGKILL before it answers, and starts it again. Answers how the first attempt ended.
 */
async function sendAndKillRouter(command: string, body: unknown, committed: () => Promise<boolean>): Promise<string> {
  const attempt = held.call('POST', `${PATH}/${command}`, body).then(
    (answer) => `answered ${answer.status}`,
    (error: unknown) => `failed: ${(error as Error).message}`,
  );
  await eventually(async () => ((await committed()) ? true : undefined), `the first ${command} to commit on the shards`);
  await cluster.kill('router0');
  const outcome = await attempt;
  await cluster.restart('router0');
  return outcome;
}

describe('retryable writes', () => {
  it('a batch insert retried through another router after the first router died inserts every document once', async () => {
    const lsid = session();
    const documents = Array.from({ length: 50 }, (_, i) => ({ _id: 1000 + i, n: 0 }));
    const body = { documents, lsid, txnNumber: 1 };
    const first = await sendAndKillRouter('insert', body, async () => (await counters()).size === 70);
    expect(first).toMatch(/^failed/);

    const retry = await router1.call('POST', `${PATH}/insert`, body);
    expect(retry.status).toBe(200);
    expect(retry.json).toMatchObject({ insertedCount: 50, writeErrors: [] });
    expect(retry.json.retriedStmtIds).toEqual(documents.map((_, i) => i));
    const after = await counters();
    expect(after.size).toBe(70);
    for (const { _id } of documents) expect(after.get(_id)).toBe(0);
  });

  it('concurrent single inserts of many sessions, coalesced into one command, retried after the router died insert each once', async () => {
    const writes = Array.from({ length: 40 }, (_, i) => ({ documents: [{ _id: 2000 + i, n: 0 }], lsid: session(), txnNumber: 3 }));
    const before = (await counters()).size;
    const attempts = writes.map((body) =>
      held.call('POST', `${PATH}/insert`, body).then(
        () => 'answered',
        () => 'failed',
      ),
    );
    await eventually(async () => ((await counters()).size === before + writes.length ? true : undefined), 'the inserts to commit');
    await cluster.kill('router0');
    expect(await Promise.all(attempts)).toEqual(writes.map(() => 'failed'));
    await cluster.restart('router0');

    const retries = await Promise.all(writes.map((body) => router1.call('POST', `${PATH}/insert`, body)));
    for (const retry of retries) expect(retry.json).toMatchObject({ insertedCount: 1, writeErrors: [], retriedStmtIds: [0] });
    expect((await counters()).size).toBe(before + writes.length);
  });

  it('a batch of $inc retried after the router died applies each once; a retry of half a batch runs only the rest', async () => {
    const lsid = session();
    const updates = Array.from({ length: 20 }, (_, i) => ({ q: { _id: i }, u: { $inc: { n: 1 } } }));
    const firstHalf = { updates: updates.slice(0, 10), lsid, txnNumber: 1 };
    const ran = await router1.call('POST', `${PATH}/update`, firstHalf);
    expect(ran.json).toMatchObject({ matchedCount: 10, modifiedCount: 10 });

    // The whole batch, under the same txnNumber: statements 0-9 ran already (their stmtIds are
    // their indexes), 10-19 run now; router0 dies before it answers.
    const whole = { updates, lsid, txnNumber: 1 };
    const first = await sendAndKillRouter('update', whole, async () => (await counters()).get(19) === 1);
    expect(first).toMatch(/^failed/);

    const retry = await router1.call('POST', `${PATH}/update`, whole);
    expect(retry.status).toBe(200);
    expect(retry.json).toMatchObject({ matchedCount: 20, modifiedCount: 20, writeErrors: [] });
    expect(retry.json.retriedStmtIds).toEqual(updates.map((_, i) => i));
    const after = await counters();
    for (let i = 0; i < 20; i++) expect(after.get(i)).toBe(1);
  });

  it("a findAndModify retried after the router died returns the first execution's image and applies once", async () => {
    const lsid = session();
    const body = { query: { _id: 0 }, update: { $inc: { n: 10 } }, new: true, lsid, txnNumber: 5 };
    const first = await sendAndKillRouter('findAndModify', body, async () => (await counters()).get(0) === 11);
    expect(first).toMatch(/^failed/);

    const retry = await router1.call('POST', `${PATH}/findAndModify`, body);
    expect(retry.status).toBe(200);
    expect(retry.json).toMatchObject({ value: { _id: 0, n: 11 }, lastErrorObject: { n: 1, updatedExisting: true } });
    expect((await counters()).get(0)).toBe(11);

    const preImage = { ...body, new: false, txnNumber: 6, update: { $inc: { n: 1 } } };
    const once = await router1.call('POST', `${PATH}/findAndModify`, preImage);
    const again = await router1.call('POST', `${PATH}/findAndModify`, preImage);
    expect(once.json.value).toEqual({ _id: 0, n: 11 });
    expect(again.json.value).toEqual({ _id: 0, n: 11 });
    expect((await counters()).get(0)).toBe(12);
  });

  it('a write acknowledged before its shard was killed is answered from the record after the restart', async () => {
    const lsid = session();
    const updates = Array.from({ length: 20 }, (_, i) => ({ q: { _id: i }, u: { $inc: { n: 100 } } }));
    const body = { updates, lsid, txnNumber: 1 };
    const before = await counters();
    const acknowledged = await router1.call('POST', `${PATH}/update`, body);
    expect(acknowledged.json).toMatchObject({ matchedCount: 20, modifiedCount: 20 });

    await cluster.kill('shard0');
    await cluster.kill('shard1');
    await cluster.restart('shard0');
    await cluster.restart('shard1');

    const retry = await eventually(async () => {
      const answer = await router1.call('POST', `${PATH}/update`, body);
      return answer.status === 200 ? answer : undefined;
    }, 'the retry to be answered after the shards restarted');
    expect(retry.json).toMatchObject({ matchedCount: 20, modifiedCount: 20, writeErrors: [] });
    expect(retry.json.retriedStmtIds).toHaveLength(20);
    const after = await counters();
    for (let i = 0; i < 20; i++) expect(after.get(i)).toBe(before.get(i)! + 100);
  });

  it("shows on router1's /metrics the sessions it knows and the statements it answered from history", async () => {
    const text = await (await request(`${cluster.routerUrls[1]}/metrics`)).body.text();
    const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]);
    expect(value('tessera_logical_session_cache_entries')).toBeGreaterThanOrEqual(4);
    // 50 inserts, 20 updates, 1 findAndModify and 20 updates were answered from history above.
    expect(value('tessera_retryable_write_statements_retried_total')).toBeGreaterThanOrEqual(91);
  });

  it('refuses an older txnNumber, a multi update and a txnNumber without a session, applying nothing', async () => {
    const lsid = session();
    const bump = (txnNumber: number) => ({ updates: [{ q: { _id: 5 }, u: { $inc: { n: 1 } } }], lsid, txnNumber });
    expect((await router1.call('POST', `${PATH}/update`, bump(3))).status).toBe(200);
    const before = (await counters()).get(5);

    const tooOld = await router1.call('POST', `${PATH}/update`, bump(2));
    expect(tooOld.json).toMatchObject({ writeErrors: [expect.objectContaining({ codeName: 'TransactionTooOld', code: 225 })] });
    const multi = await router1.call('POST', `${PATH}/update`, {
      updates: [{ q: {}, u: { $inc: { n: 1 } }, multi: true }],
      lsid,
      txnNumber: 4,
    });
    expect(multi.status).toBe(400);
    expect(multi.json).toMatchObject({ ok: 0, codeName: 'InvalidOptions' });
    const noSession = await router1.call('POST', `${PATH}/insert`, { documents: [{ _id: 'x' }], txnNumber: 1 });
    expect(noSession.status).toBe(400);
    expect((await counters()).get(5)).toBe(before);
    expect((await counters()).has('x')).toBe(false);
  });
});
