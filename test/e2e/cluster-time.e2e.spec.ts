import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';
import { eventually } from './helpers.js';
import type { RouterApi } from './router-api.js';
import { rootApi, startTestCluster } from './test-cluster.js';

/**
 * ClusterTime gossip with clients, on real processes (2 shards, 2 routers): signed `$clusterTime`
 * and `operationTime` on every answer, a client's time carried from one router to the other,
 * forged and runaway times refused with MongoDB's codes, and key rotation under a steady load.
 */
const ROTATION_SECS = 2;
let cluster: LocalCluster;
let dispose: () => Promise<void>;
let routers: RouterApi[];

beforeAll(async () => {
  ({ cluster, dispose } = await startTestCluster({
    shards: 2,
    routers: 2,
    env: { TESSERA_KEYS_ROTATION_INTERVAL_SECS: String(ROTATION_SECS) },
  }));
  routers = cluster.routerUrls.map((_, index) => rootApi(cluster, index));
});
afterAll(async () => dispose?.());

interface Wire {
  clusterTime: { $timestamp: { t: number; i: number } };
  signature: { hash: { $binary: { base64: string; subType: string } }; keyId: { $numberLong: string } };
}
type Ts = { t: number; i: number };
const PATH = '/v1/clocks/items';
const after = (a: Ts, b: Ts) => a.t > b.t || (a.t === b.t && a.i >= b.i);
const timeOf = (json: Record<string, unknown>) => (json.operationTime as { $timestamp: Ts }).$timestamp;

/** An insert through `router` that carries `clusterTime`, once the router signs its answers. */
async function insert(router: RouterApi, id: number, clusterTime?: Wire) {
  return router.call('POST', `${PATH}/insert`, { documents: [{ _id: id }], ...(clusterTime ? { $clusterTime: clusterTime } : {}) });
}

describe('ClusterTime with clients', () => {
  let signed: Wire;
  let written: Ts;

  it('answers a write with its operationTime and a signed $clusterTime', async () => {
    let id = 0;
    const answer = await eventually(async () => {
      const a = await insert(routers[0]!, ++id);
      expect(a.json).toMatchObject({ insertedCount: 1 });
      return a.json.$clusterTime === undefined ? undefined : a;
    }, 'the router to sign with the first key');
    signed = answer.json.$clusterTime as Wire;
    written = timeOf(answer.json);
    expect(signed.clusterTime.$timestamp).toEqual(written);
    expect(Math.abs(written.t - Date.now() / 1000)).toBeLessThan(60);
    expect(Buffer.from(signed.signature.hash.$binary.base64, 'base64')).toHaveLength(20);
  });

  it("carries a client's time to another router, which answers at or after it", async () => {
    const count = await routers[1]!.call('POST', `${PATH}/count`, { filter: {}, $clusterTime: signed });
    expect(count.status).toBe(200);
    expect(after(timeOf(count.json), written)).toBe(true);
  });

  it('refuses a forged time (TimeProofMismatch), an unknown key (KeyNotFound) and a runaway time (ClusterTimeFailsRateLimiter), applying nothing', async () => {
    const ahead = (seconds: number): Ts => ({ t: Math.floor(Date.now() / 1000) + seconds, i: 1 });
    const forged = { ...signed, clusterTime: { $timestamp: ahead(5) } };
    const unknownKey = { ...forged, signature: { ...signed.signature, keyId: { $numberLong: '12345' } } };
    const runaway = { ...signed, clusterTime: { $timestamp: ahead(3_600) } };
    const cases: Array<[Wire, number, string]> = [
      [forged, 401, 'TimeProofMismatch'],
      [unknownKey, 404, 'KeyNotFound'],
      [runaway, 400, 'ClusterTimeFailsRateLimiter'],
    ];
    for (const [n, [clusterTime, status, codeName]] of cases.entries()) {
      const refused = await insert(routers[1]!, 1_000 + n, clusterTime);
      expect([refused.status, refused.json.codeName]).toEqual([status, codeName]);
    }
    const stored = await routers[0]!.call('POST', `${PATH}/count`, { filter: { _id: { $gte: 1_000 } } });
    expect(stored.json).toMatchObject({ n: 0 });
  });

  it('keeps answering across key rotations, each router taking the times the other signed', async () => {
    const keyIds = new Set<string>();
    let last = signed;
    let failures = 0;
    const until = Date.now() + (ROTATION_SECS * 2 + 1) * 1000;
    for (let id = 10_000; Date.now() < until; id++) {
      const answer = await insert(routers[id % 2]!, id, last);
      if (answer.status !== 200) failures++;
      const next = answer.json.$clusterTime as Wire | undefined;
      if (next !== undefined) {
        last = next;
        keyIds.add(next.signature.keyId.$numberLong);
      }
    }
    expect(failures).toBe(0);
    expect(keyIds.size).toBeGreaterThanOrEqual(2);
  });
});
