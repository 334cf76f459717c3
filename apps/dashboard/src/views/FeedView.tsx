import { useCallback, useState } from 'react';
import { ErrorLine } from '../components';
import { type ClusterEvent, EVENT_FIELDS, useQuery, useStream } from '../hooks';

const TOPICS = ['placement', 'migrations', 'balancer', 'topology', 'ddl', 'sessions', 'transactions'] as const;
const FEED = `subscription($since: Float, $filter: ChangelogFilter) { changelog(since: $since, filter: $filter) { ${EVENT_FIELDS} } }`;
/** How far back the feed starts: the last this many events of the whole changelog. */
const BACKLOG = 500;
const KEEP = 1_000;

/**
 * The changelog live, newest first, filtered by topic and namespace, each with the reason the
 * cluster gave. It starts BACKLOG events back and resumes after the last seq it showed when the
 * socket comes back.
 */
export function FeedView() {
  const start = useQuery<{ cluster: { lastEventSeq: number } }>('{ cluster { lastEventSeq } }');
  const [topics, setTopics] = useState<string[]>([...TOPICS]);
  const [ns, setNs] = useState('');
  const [events, setEvents] = useState<ClusterEvent[]>([]);
  const filter = { topics, ...(ns.trim() ? { ns: ns.trim() } : {}) };
  const onEvent = useCallback((e: ClusterEvent) => setEvents((list) => [e, ...list].slice(0, KEEP)), []);
  const since = start.data === undefined ? undefined : Math.max(0, start.data.cluster.lastEventSeq - BACKLOG);
  const error = useStream(FEED, 'changelog', { filter }, since, onEvent);
  const toggle = (topic: string) => {
    setEvents([]);
    setTopics((t) => (t.includes(topic) ? t.filter((x) => x !== topic) : [...t, topic]));
  };
  return (
    <>
      <fieldset className="filters">
        <legend>Filter</legend>
        {TOPICS.map((t) => (
          <label key={t}>
            <input type="checkbox" checked={topics.includes(t)} onChange={() => toggle(t)} /> {t}
          </label>
        ))}
        <label>
          Namespace{' '}
          <input
            value={ns}
            placeholder="db.collection"
            onChange={(e) => {
              setEvents([]);
              setNs(e.target.value);
            }}
          />
        </label>
      </fieldset>
      <ErrorLine error={start.error ?? error} />
      <ol className="feed" data-testid="feed" aria-live="polite" aria-relevant="additions">
        {events.map((e) => (
          <li key={e.seq} data-seq={e.seq}>
            <span className="mono muted">#{e.seq}</span> <time dateTime={e.time}>{new Date(e.time).toLocaleTimeString()}</time>{' '}
            <strong>{e.kind}</strong>
            {e.ns && <> {e.ns}</>}
            {e.shard && <span className="muted"> on {e.shard}</span>}
            {reasonOf(e) && <span> — {reasonOf(e)}</span>}
            <details>
              <summary>details</summary>
              <pre>{JSON.stringify(e.details, null, 2)}</pre>
            </details>
          </li>
        ))}
      </ol>
      {events.length === 0 && <p className="muted">No event yet matches.</p>}
    </>
  );
}

/** The reason an event carries, in words: a migration's or a round's, or what failed. */
function reasonOf(e: ClusterEvent): string | undefined {
  const d = e.details;
  if (typeof d.reason === 'string') return d.reason;
  if (e.kind === 'balancer.round') {
    const migrations = Array.isArray(d.migrations)
      ? (d.migrations as Array<{ reason?: string; from?: string; to?: string; outcome?: string }>)
      : [];
    if (migrations.length === 0) return typeof d.why === 'string' ? d.why : 'moved nothing';
    return migrations.map((m) => `${m.reason ?? '?'} ${m.from ?? ''}→${m.to ?? ''} ${m.outcome ?? ''}`.trim()).join('; ');
  }
  if (typeof d.error === 'string') return d.error;
  return undefined;
}
