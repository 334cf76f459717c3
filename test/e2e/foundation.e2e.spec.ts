import { createConnection } from 'node:net';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigClient, ShardClient } from '@tessera/protocol';
import type { LocalCluster } from '../../tools/cluster/local-cluster.js';
import { errorOf } from './helpers.js';
import { startTestCluster } from './test-cluster.js';

let cluster: LocalCluster;
let dispose: () => Promise<void>;
const agent = new Agent();

beforeAll(async () => {
  ({ cluster, dispose } = await startTestCluster({
    shards: 2,
    spareShards: 1,
    routers: 1,
    env: { TESSERA_SHARD_MONITOR_INTERVAL_MS: '200', TESSERA_ROUTER_PING_INTERVAL_MS: '500' },
  }));
});

afterAll(async () => {
  await dispose?.();
  await agent.close();
});

async function get(url: string): Promise<{ status: number; text: string; headers: Record<string, unknown> }> {
  const response = await request(url, { dispatcher: agent });
  return { status: response.statusCode, text: await response.body.text(), headers: response.headers };
}

function portIsOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

describe('a local cluster of real processes', () => {
  it('answers /health on every node, ready, with the database checked where there is one', async () => {
    for (const node of cluster.nodes) {
      const { status, text } = await get(`${node.url}/health`);
      expect(status, node.name).toBe(200);
      const report = JSON.parse(text) as { ready: boolean; checks: Record<string, { ok: boolean }> };
      expect(report.ready).toBe(true);
      if (node.role === 'router') expect(report.checks.configServer?.ok).toBe(true);
      else expect(report.checks.database?.ok).toBe(true);
    }
  });

  it('serves Prometheus metrics with HTTP timings and process figures on every node', async () => {
    for (const node of cluster.nodes) {
      const { status, text, headers } = await get(`${node.url}/metrics`);
      expect(status).toBe(200);
      expect(String(headers['content-type'])).toContain('text/plain');
      expect(text).toContain('tessera_process_cpu_seconds_total');
      expect(text).toMatch(/tessera_http_request_duration_seconds_count\{method="GET",route="\/health",status="200"\} \d+/);
    }
  });

  it('logs structured JSON lines that name the node, and answers with a request id', async () => {
    const { headers } = await get(`${cluster.configUrl}/health`);
    expect(headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    const line = cluster.node('config').tail.find((l) => l.includes('listening'));
    expect(line).toBeDefined();
    expect(JSON.parse(line!)).toMatchObject({ level: 'info', node: 'config' });
  });

  it('has registered the shards and the router with the config server', async () => {
    const config = cluster.configClient();
    const shards = await config.listShards();
    expect(shards.map((s) => [s.name, s.url, s.state, s.reachable])).toEqual([
      ['shard0', cluster.node('shard0').url, 'active', true],
      ['shard1', cluster.node('shard1').url, 'active', true],
    ]);
    const routers = await config.listRouters();
    expect(routers.map((r) => r.url)).toEqual([cluster.node('router0').url]);
    expect(Date.now() - Date.parse(routers[0]!.lastPingAt)).toBeLessThan(30_000);
  });

  it('gives each added shard its identity in this cluster', async () => {
    const shard = new ShardClient(cluster.node('shard0').url, { clusterKey: cluster.clusterKey, dispatcher: agent });
    const { identity } = await shard.getIdentity();
    expect(identity).toMatchObject({ shardName: 'shard0', configUrl: cluster.configUrl });
  });
});

describe('the vector clock', () => {
  type Ts = { t: number; i: number };
  const zero: Ts = { t: 0, i: 0 };
  /** `a` is at or after `b`. */
  const later = (a: Ts, b: Ts) => a.t > b.t || (a.t === b.t && a.i >= b.i);

  function observer(send: { configTime: Ts; topologyTime: Ts }) {
    const seen = { clusterTime: zero, configTime: zero, topologyTime: zero };
    const now = () => ({ clusterTime: send.configTime, ...send });
    return { seen, gossip: { now, advance: (time: Partial<typeof seen>) => Object.assign(seen, time) } };
  }

  it('ticks TopologyTime on addShard, and a node advances from gossip but never moves backwards', async () => {
    const fromConfig = observer({ configTime: zero, topologyTime: zero });
    await new ConfigClient(cluster.configUrl, {
      clusterKey: cluster.clusterKey,
      dispatcher: agent,
      gossip: fromConfig.gossip,
    }).listShards();
    const { configTime, topologyTime } = fromConfig.seen;
    expect(topologyTime.t).toBeGreaterThan(1_700_000_000);
    expect(configTime.t * 2 ** 32 + configTime.i).toBeGreaterThanOrEqual(topologyTime.t * 2 ** 32 + topologyTime.i);

    const ahead = { configTime: { t: configTime.t + 5, i: 1 }, topologyTime: { t: topologyTime.t + 5, i: 1 } };
    const first = observer(ahead);
    await new ShardClient(cluster.node('shard1').url, {
      clusterKey: cluster.clusterKey,
      dispatcher: agent,
      gossip: first.gossip,
    }).getIdentity();
    expect(first.seen).toMatchObject(ahead);
    const second = observer({ configTime: zero, topologyTime: zero });
    await new ShardClient(cluster.node('shard1').url, {
      clusterKey: cluster.clusterKey,
      dispatcher: agent,
      gossip: second.gossip,
    }).getIdentity();
    expect(second.seen).toMatchObject(ahead);
    // ClusterTime >= ConfigTime on every node.
    expect(later(second.seen.clusterTime, ahead.configTime)).toBe(true);
  });

  it('ticks ClusterTime on the shard that wrote, which gossips it', async () => {
    const clusterTimes = async () => {
      const times = [];
      for (const shard of ['shard0', 'shard1']) {
        const seen = observer({ configTime: zero, topologyTime: zero });
        await new ShardClient(cluster.node(shard).url, {
          clusterKey: cluster.clusterKey,
          dispatcher: agent,
          gossip: seen.gossip,
        }).getIdentity();
        times.push(seen.seen);
      }
      return times;
    };
    const insert = async (id: number) => {
      const written = await request(`${cluster.routerUrls[0]}/v1/foundation/clock/insert`, {
        dispatcher: agent,
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${cluster.rootKey}` },
        body: JSON.stringify({ documents: [{ _id: id }] }),
      });
      expect(await written.body.json()).toMatchObject({ insertedCount: 1 });
    };
    // The first insert creates the database and collection, ticking ConfigTime, which ClusterTime follows.
    await insert(1);
    const before = await clusterTimes();
    await insert(2);
    const after = await clusterTimes();
    // The writing shard ticked past every time seen before the write; the other may have heard
    // of it since (the config server's shard monitor gossips it on).
    const latest = (times: typeof before) => times.map((t) => t.clusterTime).reduce((a, b) => (later(a, b) ? a : b));
    const ticked = latest(after);
    expect(later(latest(before), ticked)).toBe(false);
    expect(after.every((time) => !later(time.configTime, ticked))).toBe(true);
    expect(Math.abs(ticked.t - Date.now() / 1000)).toBeLessThan(60);
  });

  it('is not advanced by a request that fails authentication', async () => {
    const forged = observer({ configTime: { t: 4_000_000_000, i: 1 }, topologyTime: { t: 4_000_000_000, i: 1 } });
    await errorOf(
      new ShardClient(cluster.node('shard0').url, { clusterKey: 'f'.repeat(64), dispatcher: agent, gossip: forged.gossip }).getIdentity(),
    );
    const honest = observer({ configTime: zero, topologyTime: zero });
    await new ShardClient(cluster.node('shard0').url, {
      clusterKey: cluster.clusterKey,
      dispatcher: agent,
      gossip: honest.gossip,
    }).getIdentity();
    expect(honest.seen.configTime.t).toBeLessThan(4_000_000_000);
  });
});

describe('internal calls must prove the cluster key', () => {
  it('refuses an unsigned request with 401 and does nothing', async () => {
    const response = await request(`${cluster.configUrl}/internal/shards`, {
      dispatcher: agent,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'intruder', url: cluster.node('shard2').url }),
    });
    expect(response.statusCode).toBe(401);
    expect(await response.body.json()).toMatchObject({ error: { code: 'UNAUTHORIZED', retryable: false } });
    expect((await cluster.configClient().listShards()).map((s) => s.name)).not.toContain('intruder');
  });

  it('refuses a request signed with another key with 401 and does nothing', async () => {
    const impostor = new ConfigClient(cluster.configUrl, { clusterKey: 'x'.repeat(64), dispatcher: agent });
    const error = await errorOf(impostor.addShard({ name: 'intruder', url: cluster.node('shard2').url }));
    expect(error.code).toBe('UNAUTHORIZED');
    expect(error.message).toContain('signature does not match');
    expect((await cluster.configClient().listShards()).map((s) => s.name)).not.toContain('intruder');
  });

  it('refuses a replayed request whose signature is older than the allowed skew', async () => {
    const stale = new ConfigClient(cluster.configUrl, {
      clusterKey: cluster.clusterKey,
      dispatcher: agent,
      now: () => Date.now() - 10 * 60_000,
    });
    expect((await errorOf(stale.listShards())).code).toBe('UNAUTHORIZED');
  });
});

describe('addShard', () => {
  it('is idempotent for the same name and URL', async () => {
    const again = await cluster.configClient().addShard({ name: 'shard0', url: cluster.node('shard0').url });
    expect(again.name).toBe('shard0');
    expect(await cluster.configClient().listShards()).toHaveLength(2);
  });

  it('refuses a duplicate name at another URL, and a URL already in the cluster under another name', async () => {
    const config = cluster.configClient();
    const duplicateName = await errorOf(config.addShard({ name: 'shard0', url: cluster.node('shard2').url }));
    expect(duplicateName.code).toBe('ILLEGAL_OPERATION');
    expect(duplicateName.message).toContain('a shard named "shard0" already exists');
    const duplicateUrl = await errorOf(config.addShard({ name: 'other', url: cluster.node('shard1').url }));
    expect(duplicateUrl.code).toBe('ILLEGAL_OPERATION');
    expect(duplicateUrl.message).toContain('already in the cluster as shard "shard1"');
  });

  it('refuses malformed input naming the field', async () => {
    const error = await errorOf(cluster.configClient().addShard({ name: 'bad name!', url: 'ftp://x' }));
    expect(error.code).toBe('BAD_VALUE');
    expect(error.message).toContain('name:');
    expect(error.message).toContain('url:');
  });

  it('refuses a URL where nothing answers', async () => {
    const error = await errorOf(cluster.configClient().addShard({ name: 'ghost', url: 'http://127.0.0.1:1' }));
    expect(error.code).toBe('HOST_UNREACHABLE');
    expect(error.retryable).toBe(true);
    expect(error.message).toContain('does not answer');
  });

  it("refuses a shard that belongs to another cluster, with the shard's own error passed through intact", async () => {
    const spare = new ShardClient(cluster.node('shard2').url, { clusterKey: cluster.clusterKey, dispatcher: agent });
    await spare.setIdentity({ clusterId: 'another-cluster', shardName: 'theirs', configUrl: 'http://127.0.0.1:9' });
    const error = await errorOf(cluster.configClient().addShard({ name: 'shard2', url: cluster.node('shard2').url }));
    expect(error.code).toBe('ILLEGAL_OPERATION');
    expect(error.message).toBe('this shard already belongs to cluster another-cluster as shard "theirs"');
    expect(error.details).toEqual({ clusterId: 'another-cluster', shardName: 'theirs' });
    expect((await cluster.configClient().listShards()).map((s) => s.name)).toEqual(['shard0', 'shard1']);
  });
});

describe('failures and shutdown', () => {
  it('reports a shard killed with SIGKILL as unreachable', async () => {
    await cluster.kill('shard1', 'SIGKILL');
    let shard1 = (await cluster.configClient().listShards()).find((s) => s.name === 'shard1');
    for (let i = 0; i < 100 && shard1?.reachable !== false; i++) {
      await new Promise((r) => setTimeout(r, 100));
      shard1 = (await cluster.configClient().listShards()).find((s) => s.name === 'shard1');
    }
    expect(shard1).toMatchObject({ reachable: false });
    expect(shard1?.lastError).toMatch(/ECONNREFUSED|ECONNRESET|UND_ERR/);
    // The line is written as the state changes, but reaches the launcher through the process's stdout pipe, after listShards may have answered.
    const logged = () => cluster.node('config').tail.some((l) => l.includes('shard shard1 is unreachable'));
    for (let i = 0; i < 50 && !logged(); i++) await new Promise((r) => setTimeout(r, 100));
    expect(logged()).toBe(true);
  });

  it('sees the shard reachable again after a restart on its old data', async () => {
    await cluster.restart('shard1');
    let shard1 = (await cluster.configClient().listShards()).find((s) => s.name === 'shard1');
    for (let i = 0; i < 100 && shard1?.reachable !== true; i++) {
      await new Promise((r) => setTimeout(r, 100));
      shard1 = (await cluster.configClient().listShards()).find((s) => s.name === 'shard1');
    }
    expect(shard1?.reachable).toBe(true);
  });

  it('stops every process on SIGTERM with exit code 0 and leaves no port open', async () => {
    await cluster.stop();
    for (const node of cluster.nodes) {
      expect(node.process?.exitCode, node.name).toBe(0);
      expect(await portIsOpen(node.port), `${node.name} port ${node.port}`).toBe(false);
    }
  });
});
