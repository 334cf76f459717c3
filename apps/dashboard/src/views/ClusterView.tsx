import { useEffect } from 'react';
import { Card, ErrorLine, ShardTag } from '../components';
import { age, bytes, count } from '../format';
import { EVENT_FIELDS, useQuery, useStream } from '../hooks';

interface Overview {
  cluster: {
    lastEventSeq: number;
    shards: Array<{
      name: string;
      url: string;
      state: string;
      reachable: boolean | null;
      lastError: string | null;
      zones: string[];
      statistics: { chunks: number; estimatedDataBytes: number };
    }>;
    routers: Array<{ id: string; url: string; lastPingAt: string; version: string }>;
    leader: { holder: string; url: string; term: number; expiresAt: string } | null;
    vectorClock: { clusterTime: { t: number; i: number }; configTime: { t: number; i: number }; topologyTime: { t: number; i: number } };
    databases: Array<{ name: string; primaryShard: string }>;
  };
  balancerStatus: {
    mode: string;
    inBalancerRound: boolean;
    lastRound: { startedAt: string; durationMs: number; migrations: Array<{ ns: string }>; errors: Array<{ message: string }> } | null;
  };
  clusterSettings: {
    autoSplit: boolean;
    chunkSizeBytes: number;
    balancer: { policy: string; activeWindow: { start: string; stop: string } | null };
  };
}

const QUERY = `{
  cluster {
    lastEventSeq
    shards { name url state reachable lastError zones statistics { chunks estimatedDataBytes } }
    routers { id url lastPingAt version }
    leader { holder url term expiresAt }
    vectorClock { clusterTime { t i } configTime { t i } topologyTime { t i } }
    databases { name primaryShard }
  }
  balancerStatus { mode inBalancerRound lastRound { startedAt durationMs migrations { ns } errors { message } } }
  clusterSettings { autoSplit chunkSizeBytes balancer { policy activeWindow { start stop } } }
}`;

const TOPOLOGY = `subscription($since: Float) { changelog(since: $since, filter: { topics: ["topology", "balancer", "placement"] }) { ${EVENT_FIELDS} } }`;

/** Shards, routers, the config leader, the clock and the balancer; refreshed by every topology, balancer or placement event, and every 5 s for reachability and the clock. */
export function ClusterView() {
  const q = useQuery<Overview>(QUERY);
  const since = q.data?.cluster.lastEventSeq;
  const streamError = useStream(TOPOLOGY, 'changelog', {}, since, q.refetch);
  useEffect(() => {
    const timer = setInterval(q.refetch, 5_000);
    return () => clearInterval(timer);
  }, [q.refetch]);
  const data = q.data;
  if (data === undefined) return q.error ? <ErrorLine error={q.error} /> : <p>Loading…</p>;
  const { cluster, balancerStatus: balancer, clusterSettings: settings } = data;
  const names = cluster.shards.map((s) => s.name).sort();
  const t = (ts: { t: number; i: number }) => `${new Date(ts.t * 1000).toISOString().replace('.000Z', 'Z')} #${ts.i}`;
  return (
    <div className="grid">
      <ErrorLine error={q.error ?? streamError} />
      <Card title="Shards" wide>
        <table>
          <thead>
            <tr>
              <th scope="col">Shard</th>
              <th scope="col">State</th>
              <th scope="col">Reachable</th>
              <th scope="col">Chunks</th>
              <th scope="col">Data</th>
              <th scope="col">Zones</th>
              <th scope="col">URL</th>
            </tr>
          </thead>
          <tbody>
            {cluster.shards.map((s) => (
              <tr key={s.name} data-testid={`shard-${s.name}`}>
                <td>
                  <ShardTag shards={names} shard={s.name} />
                </td>
                <td className={s.state === 'draining' ? 'warn' : undefined}>{s.state}</td>
                <td title={s.lastError ?? undefined}>
                  {s.reachable === null ? 'unknown' : s.reachable ? 'yes' : `no${s.lastError ? `: ${s.lastError}` : ''}`}
                </td>
                <td className="num">{count(s.statistics.chunks)}</td>
                <td className="num">{bytes(s.statistics.estimatedDataBytes)}</td>
                <td>{s.zones.join(', ') || '—'}</td>
                <td className="mono">{s.url}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </Card>
      <Card title="Balancer">
        <dl>
          <dt>Mode</dt>
          <dd data-testid="balancer-mode">{balancer.mode}</dd>
          <dt>Round running</dt>
          <dd>{balancer.inBalancerRound ? 'yes' : 'no'}</dd>
          <dt>Window</dt>
          <dd>
            {settings.balancer.activeWindow ? `${settings.balancer.activeWindow.start}–${settings.balancer.activeWindow.stop}` : 'any time'}
          </dd>
          <dt>Policy</dt>
          <dd>{settings.balancer.policy}</dd>
          <dt>Chunk size</dt>
          <dd>{bytes(settings.chunkSizeBytes)}</dd>
          <dt>Auto-split</dt>
          <dd>{settings.autoSplit ? 'on' : 'off'}</dd>
          <dt>Last round</dt>
          <dd>
            {balancer.lastRound
              ? `${age(balancer.lastRound.startedAt)}, ${balancer.lastRound.migrations.length} migration(s), ${balancer.lastRound.errors.length} error(s)`
              : 'none yet'}
          </dd>
        </dl>
      </Card>
      <Card title="Config leader and clock">
        <dl>
          <dt>Leader</dt>
          <dd>{cluster.leader ? `${cluster.leader.holder} (term ${cluster.leader.term})` : 'none'}</dd>
          <dt>ClusterTime</dt>
          <dd className="mono">{t(cluster.vectorClock.clusterTime)}</dd>
          <dt>ConfigTime</dt>
          <dd className="mono">{t(cluster.vectorClock.configTime)}</dd>
          <dt>TopologyTime</dt>
          <dd className="mono">{t(cluster.vectorClock.topologyTime)}</dd>
          <dt>Last event</dt>
          <dd className="mono">seq {cluster.lastEventSeq}</dd>
        </dl>
      </Card>
      <Card title="Routers">
        {cluster.routers.length === 0 ? (
          <p className="muted">No router has registered.</p>
        ) : (
          <ul className="plain">
            {cluster.routers.map((r) => (
              <li key={r.id}>
                <span className="mono">{r.url}</span> — seen {age(r.lastPingAt)}, {r.version}
              </li>
            ))}
          </ul>
        )}
      </Card>
      <Card title="Databases">
        <ul className="plain">
          {cluster.databases.map((d) => (
            <li key={d.name}>
              {d.name} — primary <ShardTag shards={names} shard={d.primaryShard} />
            </li>
          ))}
        </ul>
      </Card>
    </div>
  );
}
