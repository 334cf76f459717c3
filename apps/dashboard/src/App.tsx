import { type FormEvent, useEffect, useState } from 'react';
import { ControlPlaneError, signIn } from './api';
import { type Signed, SignedContext, useConnectionState, useSigned } from './hooks';
import { ClusterView } from './views/ClusterView';
import { DistributionView } from './views/DistributionView';
import { FeedView } from './views/FeedView';
import { KeySpaceView } from './views/KeySpaceView';
import { MigrationsView } from './views/MigrationsView';
import { SessionsView } from './views/SessionsView';
import { SettingsView } from './views/SettingsView';

const VIEWS = [
  { id: 'cluster', title: 'Cluster', view: ClusterView, needs: undefined },
  { id: 'keyspace', title: 'Key space', view: KeySpaceView, needs: undefined },
  { id: 'distribution', title: 'Distribution', view: DistributionView, needs: undefined },
  { id: 'migrations', title: 'Migrations', view: MigrationsView, needs: undefined },
  { id: 'feed', title: 'Changelog', view: FeedView, needs: undefined },
  { id: 'sessions', title: 'Sessions', view: SessionsView, needs: undefined },
  { id: 'settings', title: 'Settings', view: SettingsView, needs: 'Mutation.updateClusterSettings' },
] as const;

const TOKEN_KEY = 'tessera.token';

/** The view named by the URL's hash (#/keyspace?ns=db.c), so a view can be bookmarked. */
function useRoute(): { view: string; params: URLSearchParams } {
  const read = () => {
    const [path = '', query = ''] = location.hash.replace(/^#\/?/, '').split('?');
    return { view: path || 'cluster', params: new URLSearchParams(query) };
  };
  const [route, setRoute] = useState(read);
  useEffect(() => {
    const onChange = () => setRoute(read());
    window.addEventListener('hashchange', onChange);
    return () => window.removeEventListener('hashchange', onChange);
  }, []);
  return route;
}

export function App() {
  const [signed, setSigned] = useState<Signed | null>(null);
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);

  const enter = async (token: string) => {
    setBusy(true);
    setError(undefined);
    try {
      setSigned(await signIn(token));
      sessionStorage.setItem(TOKEN_KEY, token);
    } catch (e) {
      sessionStorage.removeItem(TOKEN_KEY);
      setError(
        e instanceof ControlPlaneError && /unauthori/i.test(e.code ?? '')
          ? 'That key or token signs in no user.'
          : String((e as Error).message),
      );
    } finally {
      setBusy(false);
    }
  };

  useEffect(() => {
    const saved = sessionStorage.getItem(TOKEN_KEY);
    if (saved) void enter(saved);
  }, []);

  if (signed === null) return <SignIn onToken={enter} error={error} busy={busy} />;
  return (
    <SignedContext.Provider value={signed}>
      <Shell
        onSignOut={() => {
          sessionStorage.removeItem(TOKEN_KEY);
          signed.plane.close();
          setSigned(null);
        }}
      />
    </SignedContext.Provider>
  );
}

function SignIn({ onToken, error, busy }: { onToken: (token: string) => void; error: string | undefined; busy: boolean }) {
  const [token, setToken] = useState('');
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (token.trim()) onToken(token.trim());
  };
  return (
    <main className="signin">
      <h1>Tessera</h1>
      <form onSubmit={submit} aria-describedby="signin-help">
        <label htmlFor="token">API key or control-plane token</label>
        <input
          id="token"
          type="password"
          autoComplete="current-password"
          value={token}
          onChange={(e) => setToken(e.target.value)}
          autoFocus
        />
        <p id="signin-help" className="muted">
          A user's API key: the views follow its roles. The viewer token (TESSERA_VIEWER_TOKEN, clusterMonitor) shows the cluster; the admin
          token (TESSERA_ADMIN_TOKEN, clusterAdmin) and the root key also change it.
        </p>
        <button type="submit" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
        {error && (
          <p role="alert" className="error">
            {error}
          </p>
        )}
      </form>
    </main>
  );
}

function Shell({ onSignOut }: { onSignOut: () => void }) {
  const { identity } = useSigned();
  const may = (v: (typeof VIEWS)[number]) => v.needs === undefined || identity.allowed.has(v.needs);
  const route = useRoute();
  const connection = useConnectionState();
  const views = VIEWS.filter(may);
  const current = VIEWS.find((v) => v.id === route.view) ?? VIEWS[0];
  const View = current.view;
  return (
    <div className="shell">
      <header>
        <span className="brand">Tessera</span>
        <nav aria-label="Views">
          {views.map((v) => (
            <a key={v.id} href={`#/${v.id}`} aria-current={v.id === current.id ? 'page' : undefined}>
              {v.title}
            </a>
          ))}
        </nav>
        <span className={`connection ${connection}`} role="status" data-testid="connection">
          {connection === 'connected' ? 'live' : connection}
        </span>
        <span className="role" data-testid="signed-in" title={identity.roles.map((r) => `${r.role}@${r.db}`).join(', ')}>
          {identity.user}
        </span>
        <button type="button" className="link" onClick={onSignOut}>
          Sign out
        </button>
      </header>
      <main id="view" aria-label={current.title}>
        <h1>{current.title}</h1>
        {may(current) ? (
          <View params={route.params} />
        ) : (
          <p className="error">This view needs a role that changes the cluster ({current.needs}): clusterManager, clusterAdmin or root.</p>
        )}
      </main>
    </div>
  );
}
