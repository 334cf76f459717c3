/**
 * A cluster whose every node serves HTTPS with a certificate from tools/tls/make-local-ca.sh and
 * calls the others over it: a write and a read through the router (router to config and shard),
 * a chunk moved between shards (config to shards, shard to shard), the control plane over HTTPS.
 * A plain-HTTP client and a client that does not trust the CA get no answer.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';
import { FAST_CONFIG_ENV, waitForLeader } from './helpers.js';
import { repoRoot, rootApi, startTestCluster } from './test-cluster.js';

let cluster: LocalCluster;
let dispose: () => Promise<void>;
let tlsDir: string;

beforeAll(async () => {
  tlsDir = mkdtempSync(join(tmpdir(), 'tessera-tls-'));
  execFileSync('bash', [join(repoRoot, 'tools/tls/make-local-ca.sh'), tlsDir], { stdio: 'ignore' });
  ({ cluster, dispose } = await startTestCluster({ shards: 2, routers: 1, tlsDir, env: FAST_CONFIG_ENV }));
  await waitForLeader(cluster.configClient());
}, 120_000);

afterAll(async () => {
  await dispose?.();
  rmSync(tlsDir, { recursive: true, force: true });
});

describe('a cluster on TLS', () => {
  it('serves every node on https, and the nodes reach each other over it', async () => {
    expect(cluster.routerUrls[0]).toMatch(/^https:\/\//);
    const api = rootApi(cluster);
    expect((await api.call('POST', '/v1/shop/orders/insert', { documents: [{ _id: 1 }, { _id: 50 }] })).status).toBe(200);
    // The control plane over HTTPS: shard the collection and move a chunk from shard to shard.
    const agent = new Agent({ connect: { ca: cluster.tlsCa()! } });
    const graphql = async (query: string) => {
      const response = await request(`${cluster.node('config').url}/graphql`, {
        dispatcher: agent,
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${cluster.rootKey}` },
        body: JSON.stringify({ query }),
      });
      return (await response.body.json()) as { data?: Record<string, unknown>; errors?: unknown[] };
    };
    expect((await graphql('mutation { shardCollection(input: { ns: "shop.orders", key: { _id: 1 } }) { ns } }')).errors).toBeUndefined();
    const primary = (
      (await graphql('{ collection(ns: "shop.orders") { distribution { shard } } }')).data!.collection as {
        distribution: Array<{ shard: string }>;
      }
    ).distribution[0]!.shard;
    const other = primary === 'shard0' ? 'shard1' : 'shard0';
    expect((await graphql('mutation { splitChunk(ns: "shop.orders", at: { _id: 10 }) { shard } }')).errors).toBeUndefined();
    const moved = await graphql(`mutation { moveRange(ns: "shop.orders", min: { _id: 10 }, toShard: "${other}", wait: true) { state } }`);
    expect(moved).toMatchObject({ data: { moveRange: { state: 'committed' } } });
    expect(await api.findAll('shop.orders', { filter: {}, sort: { _id: 1 } })).toEqual([{ _id: 1 }, { _id: 50 }]);
    await Promise.all([api.close(), agent.close()]);
  });

  it('answers neither a plain-HTTP client nor one that does not trust the CA', async () => {
    const url = new URL(cluster.routerUrls[0]!);
    await expect(request(`http://${url.host}/v1/hello`)).rejects.toThrow();
    await expect(request(`${url.origin}/v1/hello`)).rejects.toThrow(/certificate/i);
  });
});
