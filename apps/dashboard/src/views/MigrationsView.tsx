import { useCallback, useEffect, useRef, useState } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { useBasics } from '../basics';
import { Card, ErrorLine, ShardTag } from '../components';
import { age, bound, bytes, count, duration, eta, rate } from '../format';
import { type ClusterEvent, EVENT_FIELDS, useQuery, useStream } from '../hooks';

interface Active {
  migrationId: string;
  ns: string;
  donor: string;
  recipient: string;
  min: string;
  max: string;
  phase: string;
  bytesCloned: number | null;
  documentsCloned: number | null;
  estimatedBytes: number | null;
  startedAt: string;
}
interface Recent {
  migrationId: string | null;
  ns: string;
  donor: string;
  recipient: string;
  min: unknown;
  max: unknown;
  outcome: string;
  error: string | null;
  endedAt: string;
  bytesCloned: number | null;
  criticalSectionMs: number | null;
  phases: Array<{ phase: string; startedAt: string; ms: number | null }>;
}

const QUERY = `{
  cluster { lastEventSeq }
  migrations(recent: 20) {
    active { migrationId ns donor recipient min max phase bytesCloned documentsCloned estimatedBytes startedAt }
    recent { migrationId ns donor recipient min max outcome error endedAt bytesCloned criticalSectionMs phases { phase startedAt ms } }
  }
}`;
const PROGRESS = `subscription($since: Float) { migrationProgress(since: $since) { ${EVENT_FIELDS} } }`;

/** What the page learned of a running migration from its events: phases with their start, clone samples. */
interface Live {
  phases: Array<{ phase: string; at: number }>;
  samples: Array<[number, number]>;
  documents: number | null;
  total: number | null;
}

const PHASE_COLORS: Record<string, string> = {
  registered: '#767676',
  cloning: '#0072B2',
  steady: '#009E73',
  criticalSection: '#D55E00',
  committing: '#CC79A7',
  committed: '#CC79A7',
  rangeDeletion: '#E69F00',
};

/**
 * Each migration as a timeline of its phases; while cloning, its progress, rate and an ETA from
 * the donor's progress reports (about one a second) and the range's size estimate. Ended ones
 * with their per-phase durations and critical-section time.
 */
export function MigrationsView() {
  const basics = useBasics();
  const q = useQuery<{ cluster: { lastEventSeq: number }; migrations: { active: Active[]; recent: Recent[] } }>(QUERY);
  const { refetch } = q;
  const live = useRef(new Map<string, Live>());
  const [, setTick] = useState(0);
  const onEvent = useCallback(
    (e: ClusterEvent) => {
      const id = String(e.details.migrationId ?? '');
      const entry = live.current.get(id) ?? { phases: [], samples: [], documents: null, total: null };
      live.current.set(id, entry);
      const at = Date.parse(e.time);
      if (e.kind === 'moveChunk.start') entry.total = typeof e.details.bytes === 'number' ? e.details.bytes : entry.total;
      if (e.kind === 'moveChunk.phase') entry.phases.push({ phase: String(e.details.phase), at });
      if (typeof e.details.bytesCloned === 'number') {
        entry.samples.push([at, e.details.bytesCloned]);
        entry.documents = typeof e.details.documentsCloned === 'number' ? e.details.documentsCloned : entry.documents;
      }
      if (e.kind !== 'moveChunk.progress') refetch();
      setTick((n) => n + 1);
    },
    [refetch],
  );
  const streamError = useStream(PROGRESS, 'migrationProgress', {}, q.data?.cluster.lastEventSeq, onEvent);
  useEffect(() => {
    const timer = setInterval(() => setTick((n) => n + 1), 1_000);
    return () => clearInterval(timer);
  }, []);
  const data = q.data?.migrations;
  return (
    <div className="grid">
      <ErrorLine error={q.error ?? streamError} />
      <Card title="In flight" wide>
        {data === undefined ? (
          <p>Loading…</p>
        ) : data.active.length === 0 ? (
          <p className="muted" data-testid="no-active">
            No migration is running.
          </p>
        ) : (
          <ul className="plain" data-testid="active-migrations">
            {data.active.map((m) => {
              const l = live.current.get(m.migrationId);
              const cloned = l?.samples.at(-1)?.[1] ?? m.bytesCloned;
              const total = m.estimatedBytes ?? l?.total ?? null;
              const perSecond = rate(l?.samples ?? []);
              const left = eta(cloned, total, perSecond);
              const percent = cloned !== null && total ? Math.min(100, (cloned / total) * 100) : null;
              return (
                <li key={m.migrationId} className="migration">
                  <div>
                    <strong>{m.ns}</strong> [{m.min}, {m.max}) <ShardTag shards={basics.shards} shard={m.donor} /> →{' '}
                    <ShardTag shards={basics.shards} shard={m.recipient} /> · phase <strong>{l?.phases.at(-1)?.phase ?? m.phase}</strong> ·
                    started {age(m.startedAt)}
                  </div>
                  <Timeline
                    phases={(l?.phases ?? [{ phase: m.phase, at: Date.parse(m.startedAt) }]).map((p) => ({ phase: p.phase, start: p.at }))}
                    end={Date.now()}
                  />
                  <div className="muted">
                    cloned {bytes(cloned)}
                    {total !== null && ` of ~${bytes(total)}`}
                    {percent !== null && ` (${percent.toFixed(0)}%)`} · {count(l?.documents ?? m.documentsCloned)} documents ·{' '}
                    {perSecond === null ? 'rate —' : `${bytes(perSecond)}/s`} · ETA {left === null ? '—' : duration(left)}
                  </div>
                  {percent !== null && <progress max={100} value={percent} aria-label={`migration ${m.migrationId} cloned`} />}
                </li>
              );
            })}
          </ul>
        )}
        <RateChart live={live.current} />
      </Card>
      <Card title="Recent" wide>
        {data && data.recent.length === 0 && <p className="muted">None yet.</p>}
        {data && data.recent.length > 0 && (
          <table data-testid="recent-migrations">
            <thead>
              <tr>
                <th scope="col">Ended</th>
                <th scope="col">Collection and range</th>
                <th scope="col">From → to</th>
                <th scope="col">Outcome</th>
                <th scope="col">Phases</th>
                <th scope="col">Total</th>
                <th scope="col">Critical section</th>
                <th scope="col">Cloned</th>
              </tr>
            </thead>
            <tbody>
              {data.recent.map((m, i) => {
                const starts = m.phases.map((p) => ({ phase: p.phase, start: Date.parse(p.startedAt) }));
                const end = Date.parse(m.endedAt);
                return (
                  <tr key={`${m.migrationId}-${i}`}>
                    <td>{age(m.endedAt)}</td>
                    <td>
                      {m.ns} [{bound(m.min)}, {bound(m.max)})
                    </td>
                    <td>
                      <ShardTag shards={basics.shards} shard={m.donor} /> → <ShardTag shards={basics.shards} shard={m.recipient} />
                    </td>
                    <td className={m.outcome === 'failed' ? 'warn' : undefined} title={m.error ?? undefined}>
                      {m.outcome}
                      {m.error && `: ${m.error}`}
                    </td>
                    <td style={{ minWidth: 160 }}>
                      <Timeline phases={starts} end={end} />
                    </td>
                    <td className="num">{starts[0] ? duration(end - starts[0].start) : '—'}</td>
                    <td className="num">{duration(m.criticalSectionMs)}</td>
                    <td className="num">{bytes(m.bytesCloned)}</td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        )}
      </Card>
    </div>
  );
}

/** A bar cut into the phases, each as wide as it lasted, labelled for screen readers and on hover. */
function Timeline({ phases, end }: { phases: Array<{ phase: string; start: number }>; end: number }) {
  const first = phases[0]?.start ?? end;
  const total = Math.max(1, end - first);
  const parts = phases.map((p, i) => ({ phase: p.phase, ms: (phases[i + 1]?.start ?? end) - p.start }));
  const label = parts.map((p) => `${p.phase} ${duration(p.ms)}`).join(', ');
  return (
    <div className="timeline" role="img" aria-label={label} title={label}>
      {parts.map((p, i) => (
        <span key={i} style={{ width: `${Math.max(0.5, (p.ms / total) * 100)}%`, background: PHASE_COLORS[p.phase] ?? '#555555' }} />
      ))}
    </div>
  );
}

/** Cloning throughput over the last two minutes, summed over running migrations, drawn with uPlot. */
function RateChart({ live }: { live: Map<string, Live> }) {
  const box = useRef<HTMLDivElement>(null);
  const history = useRef<[number[], number[]]>([[], []]);
  useEffect(() => {
    const element = box.current;
    if (element === null) return;
    const plot = new uPlot(
      {
        width: Math.max(200, element.clientWidth),
        height: 140,
        series: [{}, { label: 'cloning', stroke: '#0072B2', width: 2, value: (_u, v) => (v === null ? '—' : `${bytes(v)}/s`) }],
        axes: [{}, { values: (_u, ticks) => ticks.map((t) => bytes(t)), size: 70 }],
        scales: { x: { time: true } },
      },
      history.current,
      element,
    );
    const timer = setInterval(() => {
      const now = Date.now();
      let sum = 0;
      for (const entry of live.values()) if (now - (entry.samples.at(-1)?.[0] ?? 0) < 5_000) sum += rate(entry.samples) ?? 0;
      const [xs, ys] = history.current;
      xs.push(now / 1000);
      ys.push(sum);
      while (xs.length > 0 && xs[0]! < now / 1000 - 120) {
        xs.shift();
        ys.shift();
      }
      plot.setSize({ width: Math.max(200, element.clientWidth), height: 140 });
      plot.setData(history.current);
    }, 1_000);
    return () => {
      clearInterval(timer);
      plot.destroy();
    };
  }, [live]);
  return <div ref={box} className="chart" aria-label="Cloning rate over the last two minutes" role="img" />;
}
