import { type FormEvent, useState } from 'react';
import { useBasics } from '../basics';
import { Card, ErrorLine } from '../components';
import { useQuery, useSigned } from '../hooks';

interface Settings {
  clusterSettings: {
    autoSplit: boolean;
    chunkSizeBytes: number;
    balancer: { mode: string; policy: string; attemptToBalanceJumboChunks: boolean; activeWindow: { start: string; stop: string } | null };
  };
}
const QUERY =
  '{ clusterSettings { autoSplit chunkSizeBytes balancer { mode policy attemptToBalanceJumboChunks activeWindow { start stop } } } }';
const MIB = 1024 * 1024;

/** A mutation with its outcome: the last error (MongoDB's code and message) or what it did. */
function useMutation() {
  const { plane } = useSigned();
  const [state, setState] = useState<{ busy: boolean; error?: Error; done?: string }>({ busy: false });
  const run = async (query: string, variables: Record<string, unknown>, done: (data: Record<string, unknown>) => string) => {
    setState({ busy: true });
    try {
      const data = await plane.request<Record<string, unknown>>(query, variables);
      setState({ busy: false, done: done(data) });
      return true;
    } catch (error) {
      setState({ busy: false, error: error as Error });
      return false;
    }
  };
  return { ...state, run };
}

function Outcome({ error, done }: { error?: Error; done?: string }) {
  return (
    <>
      <ErrorLine error={error} />
      {done && (
        <p role="status" className="ok">
          {done}
        </p>
      )}
    </>
  );
}

/** The admin's controls: balancer, window, chunk size, auto-split; per collection balancing; moving a chunk. */
export function SettingsView() {
  const q = useQuery<Settings>(QUERY);
  if (q.data === undefined) return q.error ? <ErrorLine error={q.error} /> : <p>Loading…</p>;
  return (
    <div className="grid">
      <BalancerSettings settings={q.data.clusterSettings} onChange={q.refetch} />
      <CollectionSettings />
      <MoveChunk />
    </div>
  );
}

function BalancerSettings({ settings, onChange }: { settings: Settings['clusterSettings']; onChange: () => void }) {
  const m = useMutation();
  const [start, setStart] = useState(settings.balancer.activeWindow?.start ?? '');
  const [stop, setStop] = useState(settings.balancer.activeWindow?.stop ?? '');
  const [chunkMiB, setChunkMiB] = useState(String(settings.chunkSizeBytes / MIB));
  const update = (input: Record<string, unknown>, what: string) =>
    m
      .run('mutation($input: ClusterSettingsInput!) { updateClusterSettings(input: $input) { chunkSizeBytes } }', { input }, () => what)
      .then(onChange);
  const saveWindow = (e: FormEvent) => {
    e.preventDefault();
    void update(
      { activeWindow: start || stop ? { start, stop } : null },
      start || stop ? `Window set to ${start}–${stop}.` : 'Window removed.',
    );
  };
  const saveChunkSize = (e: FormEvent) => {
    e.preventDefault();
    void update({ chunkSizeBytes: Math.round(Number(chunkMiB) * MIB) }, `Chunk size set to ${chunkMiB} MiB.`);
  };
  const on = settings.balancer.mode !== 'off';
  return (
    <Card title="Balancer">
      <p>
        The balancer is <strong data-testid="settings-balancer-mode">{on ? 'on' : 'off'}</strong>.{' '}
        <button
          type="button"
          disabled={m.busy}
          onClick={() =>
            void m
              .run('mutation($enabled: Boolean!) { setBalancerState(enabled: $enabled) { mode } }', { enabled: !on }, () =>
                on ? 'Balancer stopped.' : 'Balancer started.',
              )
              .then(onChange)
          }
        >
          {on ? 'Stop the balancer' : 'Start the balancer'}
        </button>
      </p>
      <form onSubmit={saveWindow} className="row">
        <label>
          Window from <input type="time" value={start} onChange={(e) => setStart(e.target.value)} />
        </label>
        <label>
          to <input type="time" value={stop} onChange={(e) => setStop(e.target.value)} />
        </label>
        <button type="submit" disabled={m.busy}>
          Save window
        </button>
        <button
          type="button"
          disabled={m.busy}
          onClick={() => void update({ activeWindow: null }, 'Window removed.').then(() => (setStart(''), setStop('')))}
        >
          Any time
        </button>
      </form>
      <form onSubmit={saveChunkSize} className="row">
        <label>
          Chunk size (MiB) <input type="number" step="any" value={chunkMiB} onChange={(e) => setChunkMiB(e.target.value)} />
        </label>
        <button type="submit" disabled={m.busy}>
          Save chunk size
        </button>
      </form>
      <div className="row">
        <label>
          <input
            type="checkbox"
            checked={settings.autoSplit}
            onChange={(e) => void update({ autoSplit: e.target.checked }, `Auto-split ${e.target.checked ? 'on' : 'off'}.`)}
          />{' '}
          Auto-split
        </label>
        <label>
          <input
            type="checkbox"
            checked={settings.balancer.attemptToBalanceJumboChunks}
            onChange={(e) =>
              void update(
                { attemptToBalanceJumboChunks: e.target.checked },
                `Jumbo chunks ${e.target.checked ? 'are' : 'are not'} balanced.`,
              )
            }
          />{' '}
          Balance jumbo chunks
        </label>
        <label>
          Policy{' '}
          <select value={settings.balancer.policy} onChange={(e) => void update({ policy: e.target.value }, `Policy ${e.target.value}.`)}>
            <option value="dataSize">dataSize</option>
            <option value="chunkCount">chunkCount</option>
          </select>
        </label>
      </div>
      <Outcome error={m.error} done={m.done} />
    </Card>
  );
}

function CollectionSettings() {
  const basics = useBasics();
  const m = useMutation();
  const [ns, setNs] = useState('');
  const [chunkMiB, setChunkMiB] = useState('');
  const target = ns || basics.namespaces[0] || '';
  const configure = (input: Record<string, unknown>, what: string) =>
    void m.run(
      'mutation($ns: String!, $chunkSizeBytes: Float, $enableBalancing: Boolean, $enableAutoMerger: Boolean, $defragmentCollection: Boolean) { configureCollectionBalancing(ns: $ns, chunkSizeBytes: $chunkSizeBytes, enableBalancing: $enableBalancing, enableAutoMerger: $enableAutoMerger, defragmentCollection: $defragmentCollection) { ns } }',
      { ns: target, ...input },
      () => `${target}: ${what}.`,
    );
  return (
    <Card title="Collection balancing">
      <NamespaceSelect namespaces={basics.namespaces} value={target} onChange={setNs} />
      <form
        className="row"
        onSubmit={(e) => {
          e.preventDefault();
          configure(
            { chunkSizeBytes: chunkMiB === '' ? null : Math.round(Number(chunkMiB) * MIB) },
            chunkMiB === '' ? "chunk size back to the cluster's" : `chunk size ${chunkMiB} MiB`,
          );
        }}
      >
        <label>
          Chunk size (MiB, empty: the cluster&apos;s){' '}
          <input type="number" step="any" value={chunkMiB} onChange={(e) => setChunkMiB(e.target.value)} />
        </label>
        <button type="submit" disabled={m.busy || !target}>
          Save
        </button>
      </form>
      <div className="row">
        <button type="button" disabled={m.busy || !target} onClick={() => configure({ enableBalancing: false }, 'balancing off')}>
          Stop balancing it
        </button>
        <button type="button" disabled={m.busy || !target} onClick={() => configure({ enableBalancing: true }, 'balancing on')}>
          Balance it
        </button>
        <button type="button" disabled={m.busy || !target} onClick={() => configure({ enableAutoMerger: true }, 'auto-merger on')}>
          Auto-merge on
        </button>
        <button type="button" disabled={m.busy || !target} onClick={() => configure({ enableAutoMerger: false }, 'auto-merger off')}>
          Auto-merge off
        </button>
        <button
          type="button"
          disabled={m.busy || !target}
          onClick={() => configure({ defragmentCollection: true }, 'defragmentation started')}
        >
          Defragment
        </button>
      </div>
      <Outcome error={m.error} done={m.done} />
    </Card>
  );
}

function MoveChunk() {
  const basics = useBasics();
  const m = useMutation();
  const [ns, setNs] = useState('');
  const [find, setFind] = useState('');
  const [to, setTo] = useState('');
  const target = ns || basics.namespaces[0] || '';
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (!isJson(find)) return;
    const key: unknown = JSON.parse(find);
    void m.run(
      'mutation($ns: String!, $find: JSON, $to: String!) { moveChunk(ns: $ns, find: $find, to: $to) { operationId state } }',
      { ns: target, find: key, to: to || basics.shards[0] },
      (data) => {
        const op = data.moveChunk as { operationId: string; state: string };
        return `Migration ${op.operationId} ${op.state}: watch it under Migrations.`;
      },
    );
  };
  const badJson = find !== '' && !isJson(find);
  return (
    <Card title="Move a chunk">
      <form onSubmit={submit} className="stack">
        <NamespaceSelect namespaces={basics.namespaces} value={target} onChange={setNs} />
        <label>
          A shard key in the chunk (JSON){' '}
          <input value={find} placeholder='{"customer": 42}' onChange={(e) => setFind(e.target.value)} aria-invalid={badJson} />
        </label>
        {badJson && <p className="error">Not JSON.</p>}
        <label>
          To shard{' '}
          <select value={to || basics.shards[0] || ''} onChange={(e) => setTo(e.target.value)}>
            {basics.shards.map((s) => (
              <option key={s}>{s}</option>
            ))}
          </select>
        </label>
        <button type="submit" disabled={m.busy || badJson || find === '' || !target}>
          Move
        </button>
      </form>
      <Outcome error={m.error} done={m.done} />
    </Card>
  );
}

/** The sharded collection a form acts on. */
function NamespaceSelect({ namespaces, value, onChange }: { namespaces: string[]; value: string; onChange: (ns: string) => void }) {
  return (
    <label>
      Collection{' '}
      <select value={value} onChange={(e) => onChange(e.target.value)}>
        {namespaces.map((n) => (
          <option key={n}>{n}</option>
        ))}
      </select>
    </label>
  );
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}
