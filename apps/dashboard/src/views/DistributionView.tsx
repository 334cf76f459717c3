import { Card, ErrorLine, PerCollection, ShardTag } from '../components';
import { bytes, count, shardColor } from '../format';
import { EVENT_FIELDS, useQuery, useStream } from '../hooks';
import { describeViolation, whyIdle } from '../why-idle';

interface Distribution {
  cluster: { lastEventSeq: number; shards: Array<{ name: string; state: string }> };
  collection: {
    balancingEnabled: boolean;
    defragmenting: boolean;
    chunkSizeBytes: number | null;
    distribution: Array<{
      shard: string;
      chunks: number;
      estimatedDataBytes: number;
      documents: number | null;
      estimatedChunks: number;
      jumboChunks: number;
    }>;
  };
  balancerCollectionStatus: { balancerCompliant: boolean; firstComplianceViolation: string | null };
  clusterSettings: {
    chunkSizeBytes: number;
    balancer: { mode: string; policy: string; activeWindow: { start: string; stop: string } | null };
  };
  balancerStatus: { lastRound: { throttleTimeMillis: number; errors: Array<{ ns: string | null; message: string }> } | null };
  migrations: { active: Array<{ migrationId: string }> };
}

const QUERY = `query($ns: String!) {
  cluster { lastEventSeq shards { name state } }
  collection(ns: $ns) { balancingEnabled defragmenting chunkSizeBytes distribution { shard chunks estimatedDataBytes documents estimatedChunks jumboChunks } }
  balancerCollectionStatus(ns: $ns) { balancerCompliant firstComplianceViolation }
  clusterSettings { chunkSizeBytes balancer { mode policy activeWindow { start stop } } }
  balancerStatus { lastRound { throttleTimeMillis errors { ns message } } }
  migrations(ns: $ns, recent: 1) { active { migrationId } }
}`;
const EVENTS = `subscription($since: Float, $ns: String) { changelog(since: $since, filter: { ns: $ns, topics: ["placement", "migrations", "balancer"] }) { ${EVENT_FIELDS} } }`;

/** MongoDB's imbalance threshold in dataSize mode: three max chunk sizes between the fullest and emptiest shard. */
const THRESHOLD_CHUNKS = 3;

export function DistributionView({ params }: { params: URLSearchParams }) {
  return <PerCollection params={params} view="distribution" render={(ns, shards) => <CollectionDistribution ns={ns} shards={shards} />} />;
}

function CollectionDistribution({ ns, shards }: { ns: string; shards: string[] }) {
  const q = useQuery<Distribution>(QUERY, { ns });
  const { refetch } = q;
  const streamError = useStream(EVENTS, 'changelog', { ns }, q.data?.cluster.lastEventSeq, refetch);
  const d = q.data;
  if (d === undefined) return q.error ? <ErrorLine error={q.error} /> : <p>Loading…</p>;
  const chunkSize = d.collection.chunkSizeBytes ?? d.clusterSettings.chunkSizeBytes;
  const rows = [...d.collection.distribution].sort((a, b) => a.shard.localeCompare(b.shard));
  const maxBytes = Math.max(1, ...rows.map((r) => r.estimatedDataBytes));
  const maxChunks = Math.max(1, ...rows.map((r) => r.chunks));
  const spread =
    rows.length > 0 ? Math.max(...rows.map((r) => r.estimatedDataBytes)) - Math.min(...rows.map((r) => r.estimatedDataBytes)) : 0;
  const now = new Date();
  const reasons = whyIdle({
    balancerMode: d.clusterSettings.balancer.mode,
    window: d.clusterSettings.balancer.activeWindow,
    now: `${String(now.getHours()).padStart(2, '0')}:${String(now.getMinutes()).padStart(2, '0')}`,
    balancingEnabled: d.collection.balancingEnabled,
    compliant: d.balancerCollectionStatus.balancerCompliant,
    violation: d.balancerCollectionStatus.firstComplianceViolation,
    drainingShards: d.cluster.shards.filter((s) => s.state === 'draining').map((s) => s.name),
    jumboChunks: rows.reduce((n, r) => n + r.jumboChunks, 0),
    activeMigrations: d.migrations.active.length,
    throttleMs: d.balancerStatus.lastRound?.throttleTimeMillis ?? 0,
    roundErrors: (d.balancerStatus.lastRound?.errors ?? []).filter((e) => e.ns === ns).map((e) => e.message),
  });
  return (
    <div className="grid">
      <ErrorLine error={q.error ?? streamError} />
      <Card title="Per shard" wide>
        <table data-testid="distribution">
          <thead>
            <tr>
              <th scope="col">Shard</th>
              <th scope="col">Data (estimated)</th>
              <th scope="col">Chunks</th>
              <th scope="col">Documents</th>
              <th scope="col">Sized chunks</th>
              <th scope="col">Jumbo</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((r) => (
              <tr key={r.shard}>
                <td>
                  <ShardTag shards={shards} shard={r.shard} />
                </td>
                <td>
                  <Bar
                    value={r.estimatedDataBytes}
                    max={maxBytes}
                    color={shardColor(shards, r.shard)}
                    label={bytes(r.estimatedDataBytes)}
                  />
                </td>
                <td>
                  <Bar value={r.chunks} max={maxChunks} color={shardColor(shards, r.shard)} label={count(r.chunks)} />
                </td>
                <td className="num">{count(r.documents)}</td>
                <td className="num" title="Chunks with a size estimate: the sums leave the others out">
                  {count(r.estimatedChunks)} of {count(r.chunks)}
                </td>
                <td className={r.jumboChunks > 0 ? 'num warn' : 'num'}>{count(r.jumboChunks)}</td>
              </tr>
            ))}
          </tbody>
        </table>
        <p className="muted">
          Imbalance threshold ({d.clusterSettings.balancer.policy}): {THRESHOLD_CHUNKS} × max chunk size ={' '}
          {bytes(THRESHOLD_CHUNKS * chunkSize)}; the fullest and emptiest shard now differ by {bytes(spread)}.
        </p>
      </Card>
      <Card title="Compliance">
        <p data-testid="compliance" className={d.balancerCollectionStatus.balancerCompliant ? undefined : 'warn'}>
          {d.balancerCollectionStatus.balancerCompliant
            ? 'Compliant.'
            : `Not compliant: ${describeViolation(d.balancerCollectionStatus.firstComplianceViolation)}.`}
        </p>
        {d.collection.defragmenting && <p>Being defragmented.</p>}
      </Card>
      <Card title="Why nothing is moving">
        {reasons.length === 0 ? (
          <p>Migrations of this collection are running (see Migrations).</p>
        ) : (
          <ul data-testid="why-idle">
            {reasons.map((r) => (
              <li key={r}>{r}</li>
            ))}
          </ul>
        )}
      </Card>
    </div>
  );
}

function Bar({ value, max, color, label }: { value: number; max: number; color: string; label: string }) {
  return (
    <div className="bar">
      <span style={{ width: `${(value / max) * 100}%`, background: color }} aria-hidden="true" />
      <span className="bar-label">{label}</span>
    </div>
  );
}
