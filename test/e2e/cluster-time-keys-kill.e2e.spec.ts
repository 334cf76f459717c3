import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';
import { FAST_CONFIG_ENV, eventually, waitForLeader } from './helpers.js';
import type { RouterApi } from './router-api.js';
import { rootApi, startTestCluster } from './test-cluster.js';

/**
 * Key rotation across a kill -9 of the config server, which generates the keys: writes alternate
 * between two routers, each carrying the `$clusterTime` the other signed, while the config
 * process dies twice at moments from a seed (printed; TESSERA_KEYS_KILL_SEED replays it) and is
 * restarted. The keys already generated keep signing and verifying meanwhile, the restarted
 * leader generates the next ones, and no request fails. Afterwards the keys table has no hole:
 * each key signs from where the one before it stopped.
 */
/**
 * The next key is generated when the one before it starts signing, so nodes have one interval to
 * fetch it before it signs; an outage of the generator must leave them time for that (the
 * restart and a new leader's election take about 5 s here). At 6 s, a key generated late by the
 * restarted leader reached one router and not the other before it signed: KeyNotFound.
 */
const ROTATION_SECS = 12;
const SEED = /^\d+$/.test(process.env.TESSERA_KEYS_KILL_SEED ?? '')
  ? Number(process.env.TESSERA_KEYS_KILL_SEED)
  : Math.floor(Math.random() * 1e6);
let cluster: LocalCluster;
let dispose: () => Promise<void>;
let routers: RouterApi[];

beforeAll(async () => {
  ({ cluster, dispose } = await startTestCluster({
    shards: 1,
    routers: 2,
    env: { ...FAST_CONFIG_ENV, TESSERA_KEYS_ROTATION_INTERVAL_SECS: String(ROTATION_SECS) },
  }));
  routers = cluster.routerUrls.map((_, index) => rootApi(cluster, index));
  await waitForLeader(cluster.configClient());
});
afterAll(async () => {
  for (const router of routers ?? []) await router.close();
  await dispose?.();
});

interface Wire {
  signature: { keyId: { $numberLong: string } };
}

describe('key rotation across a kill -9 of the config server', () => {
  it(`signs and verifies without a failed request, and leaves no hole in the keys (seed ${SEED})`, async () => {
    console.log(`keys kill test: seed ${SEED} (TESSERA_KEYS_KILL_SEED=${SEED} replays it)`);
    const PATH = '/v1/keys/items';
    let last = await eventually(async () => {
      const answer = await routers[0]!.call('POST', `${PATH}/insert`, { documents: [{ _id: 0 }] });
      return answer.json.$clusterTime as Wire | undefined;
    }, 'the router to sign with the first key');
    const killAfterMs = [1_000 + (SEED % 4_000), 1_000 + (Math.floor(SEED / 4_000) % 4_000)];
    const failures: string[] = [];
    const keyIds = new Set<string>();
    let writing = true;
    // Failures of the client itself count as failed requests, and end the loop.
    const writer = (async () => {
      for (let id = 1; writing; id++) {
        const answer = await routers[id % 2]!.call('POST', `${PATH}/insert`, { documents: [{ _id: id }], $clusterTime: last });
        if (answer.status !== 200) failures.push(`${answer.status} ${JSON.stringify(answer.json).slice(0, 200)}`);
        const next = answer.json.$clusterTime as Wire | undefined;
        if (next !== undefined) {
          last = next;
          keyIds.add(next.signature.keyId.$numberLong);
        }
      }
    })().catch((error: unknown) => void failures.push(String(error)));
    try {
      for (const wait of killAfterMs) {
        await new Promise((resolve) => setTimeout(resolve, wait));
        await cluster.kill('config');
        await cluster.restart('config');
      }
      // Two more rotations after the last restart: keys the restarted leader generated sign too.
      await new Promise((resolve) => setTimeout(resolve, 2 * ROTATION_SECS * 1000));
    } finally {
      writing = false;
      await writer;
    }
    expect(failures, `seed ${SEED}`).toEqual([]);
    expect(keyIds.size).toBeGreaterThanOrEqual(3);

    const catalog = new pg.Pool({ connectionString: cluster.node('config').env.TESSERA_DATABASE_URL, max: 1 });
    try {
      const keys = await catalog.query<{ key_id: string; expires_at: Date }>(
        'SELECT key_id::text, expires_at FROM cluster_time_keys ORDER BY key_id',
      );
      for (let i = 1; i < keys.rows.length; i++) {
        const [before, after] = [keys.rows[i - 1]!, keys.rows[i]!];
        expect(BigInt(after.key_id) - BigInt(before.key_id), `key ids (seed ${SEED})`).toBe(1n);
        expect(
          after.expires_at.getTime() - before.expires_at.getTime(),
          `key ${after.key_id} signs from where ${before.key_id} stopped`,
        ).toBe(ROTATION_SECS * 1000);
      }
    } finally {
      await catalog.end();
    }
    // Two kills and restarts of the config process, and two rotations after: about 45 s here.
  }, 120_000);
});
