import { useEffect } from 'react';
import { Card, ErrorLine } from '../components';
import { age, count, duration } from '../format';
import { EVENT_FIELDS, useQuery, useStream } from '../hooks';

interface Data {
  cluster: { lastEventSeq: number };
  sessions: {
    totalCount: number;
    nodes: Array<{
      lsid: string;
      startedAt: string;
      lastUse: string;
      openCursors: number;
      highestTxnNumber: number | null;
      nodes: Array<{ node: string; role: string }>;
    }>;
  };
  transactions: {
    unreachableShards: string[];
    transactions: Array<{
      lsid: string;
      txnNumber: number;
      state: string;
      ageMs: number | null;
      coordinator: string | null;
      namespaces: string[];
      participants: Array<{ shard: string; state: string }>;
    }>;
  };
}

const QUERY = `{
  cluster { lastEventSeq }
  sessions(first: 200) { totalCount nodes { lsid startedAt lastUse openCursors highestTxnNumber nodes { node role } } }
  transactions { unreachableShards transactions { lsid txnNumber state ageMs coordinator namespaces participants { shard state } } }
}`;
const EVENTS = `subscription($since: Float) { changelog(since: $since, filter: { topics: ["sessions", "transactions"] }) { ${EVENT_FIELDS} } }`;

/** Logical sessions and the transactions in progress, refreshed by their events and every 5 s (ages, last use). */
export function SessionsView() {
  const q = useQuery<Data>(QUERY);
  const { refetch } = q;
  const streamError = useStream(EVENTS, 'changelog', {}, q.data?.cluster.lastEventSeq, refetch);
  useEffect(() => {
    const timer = setInterval(refetch, 5_000);
    return () => clearInterval(timer);
  }, [refetch]);
  const d = q.data;
  if (d === undefined) return q.error ? <ErrorLine error={q.error} /> : <p>Loading…</p>;
  return (
    <div className="grid">
      <ErrorLine error={q.error ?? streamError} />
      <Card title={`Transactions (${d.transactions.transactions.length})`} wide>
        {d.transactions.unreachableShards.length > 0 && (
          <p className="warn">Unreachable, not listed: {d.transactions.unreachableShards.join(', ')}</p>
        )}
        {d.transactions.transactions.length === 0 ? (
          <p className="muted">No transaction in progress.</p>
        ) : (
          <table data-testid="transactions">
            <thead>
              <tr>
                <th scope="col">Session</th>
                <th scope="col">txnNumber</th>
                <th scope="col">State</th>
                <th scope="col">Age</th>
                <th scope="col">Coordinator</th>
                <th scope="col">Participants</th>
                <th scope="col">Wrote</th>
              </tr>
            </thead>
            <tbody>
              {d.transactions.transactions.map((t) => (
                <tr key={`${t.lsid}:${t.txnNumber}`}>
                  <td className="mono">{t.lsid.slice(0, 8)}…</td>
                  <td className="num">{t.txnNumber}</td>
                  <td className={t.state === 'prepared' ? 'warn' : undefined}>{t.state}</td>
                  <td className="num">{duration(t.ageMs)}</td>
                  <td>{t.coordinator ?? '—'}</td>
                  <td>{t.participants.map((p) => `${p.shard} (${p.state})`).join(', ')}</td>
                  <td>{t.namespaces.join(', ') || '—'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Card>
      <Card title={`Sessions (${count(d.sessions.totalCount)})`} wide>
        {d.sessions.nodes.length === 0 ? (
          <p className="muted">No session.</p>
        ) : (
          <table data-testid="sessions">
            <thead>
              <tr>
                <th scope="col">Session</th>
                <th scope="col">Started</th>
                <th scope="col">Last use</th>
                <th scope="col">Open cursors</th>
                <th scope="col">Highest txnNumber</th>
                <th scope="col">Cached on</th>
              </tr>
            </thead>
            <tbody>
              {d.sessions.nodes.map((s) => (
                <tr key={s.lsid}>
                  <td className="mono">{s.lsid}</td>
                  <td>{age(s.startedAt)}</td>
                  <td>{age(s.lastUse)}</td>
                  <td className="num">{s.openCursors}</td>
                  <td className="num">{s.highestTxnNumber ?? '—'}</td>
                  <td>{s.nodes.map((n) => n.node).join(', ')}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        {d.sessions.totalCount > d.sessions.nodes.length && (
          <p className="muted">Showing the first {d.sessions.nodes.length} in lsid order.</p>
        )}
      </Card>
    </div>
  );
}
