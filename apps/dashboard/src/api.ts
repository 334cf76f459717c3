import { type Client, createClient } from 'graphql-ws';

/** A GraphQL error as the control plane formats it: MongoDB's code name in extensions.code. */
export class ControlPlaneError extends Error {
  constructor(
    message: string,
    readonly code: string | undefined,
  ) {
    super(message);
  }
}

interface GraphqlAnswer<T> {
  data?: T | null;
  errors?: Array<{ message: string; extensions?: { code?: string } }>;
}

/** `idle`: the view streams nothing, so the socket is closed on purpose. */
export type ConnectionState = 'connecting' | 'connected' | 'reconnecting' | 'idle';

/**
 * The control plane as the page sees it: queries and mutations over HTTP with the bearer token,
 * subscriptions over one graphql-ws socket that reconnects for ever (every stream resumes from
 * the last seq it saw, see `useStream`).
 */
export class ControlPlane {
  private readonly ws: Client;
  private readonly listeners = new Set<(state: ConnectionState) => void>();
  /** Streams running: the lazy socket closes when there are none, which is no outage. */
  private streams = 0;
  state: ConnectionState = 'connecting';

  constructor(
    readonly token: string,
    private readonly origin = location.origin,
  ) {
    this.ws = createClient({
      url: `${origin.replace(/^http/, 'ws')}/graphql`,
      connectionParams: { authorization: `Bearer ${token}` },
      lazy: true,
      // Streams resubscribe themselves from their last seq (`stream`), not from where they began.
      retryAttempts: 0,
      on: {
        connected: () => this.setState('connected'),
        closed: () => this.setState(this.streams === 0 ? 'idle' : this.state === 'connecting' ? 'connecting' : 'reconnecting'),
      },
    });
  }

  async request<T>(query: string, variables: Record<string, unknown> = {}): Promise<T> {
    const response = await fetch(`${this.origin}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${this.token}` },
      body: JSON.stringify({ query, variables }),
    });
    const answer = (await response.json().catch(() => ({}))) as GraphqlAnswer<T>;
    const error = answer.errors?.[0];
    if (error !== undefined) throw new ControlPlaneError(error.message, error.extensions?.code);
    if (answer.data === undefined || answer.data === null) throw new ControlPlaneError(`HTTP ${response.status}`, undefined);
    return answer.data;
  }

  /** Runs a subscription until the returned function is called; errors end it. */
  subscribe<T>(query: string, variables: Record<string, unknown>, onNext: (data: T) => void, onError: (error: Error) => void): () => void {
    return this.ws.subscribe<T>(
      { query, variables },
      {
        next: (answer) => {
          const error = answer.errors?.[0];
          if (error !== undefined) onError(new ControlPlaneError(error.message, (error.extensions as { code?: string } | undefined)?.code));
          else if (answer.data) onNext(answer.data);
        },
        error: (error) => onError(error instanceof Error ? error : closeError(error)),
        complete: () => undefined,
      },
    );
  }

  /**
   * A stream of events with a `seq` (a subscription taking `since`) that loses none across
   * reconnects: it starts after `since` and remembers the last seq delivered; when the socket
   * drops it subscribes again after that seq, backing off up to 5 s. Items come once, in order.
   * A GraphQL error or a refused token (close 4403) ends it.
   */
  stream<T extends { seq: number }>(
    query: string,
    field: string,
    variables: Record<string, unknown>,
    since: number,
    onItem: (item: T) => void,
    onError: (error: Error) => void,
  ): () => void {
    let last = since;
    let stopped = false;
    let stop: () => void = () => undefined;
    let retries = 0;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const start = () => {
      stop = this.subscribe<Record<string, T>>(
        query,
        { ...variables, since: last },
        (data) => {
          retries = 0;
          const item = data[field];
          if (item === undefined || item.seq <= last) return;
          last = item.seq;
          onItem(item);
        },
        (error) => {
          if (stopped) return;
          const closed = (error as Error & { closeCode?: number }).closeCode;
          if (error instanceof ControlPlaneError || closed === 4403 || closed === 4401) return onError(error);
          this.setState('reconnecting');
          timer = setTimeout(start, Math.min(250 * 2 ** retries++, 5_000));
        },
      );
    };
    this.streams++;
    start();
    return () => {
      if (!stopped) this.streams--;
      stopped = true;
      clearTimeout(timer);
      stop();
    };
  }

  onStateChange(listener: (state: ConnectionState) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  close(): void {
    void this.ws.dispose();
  }

  private setState(state: ConnectionState): void {
    this.state = state;
    for (const listener of this.listeners) listener(state);
  }
}

/** A socket close (graphql-ws hands over the CloseEvent) as an Error that keeps its code. */
function closeError(error: unknown): Error {
  const event = error as { code?: number; reason?: string } | null;
  if (event?.code === undefined) return new Error(String(error));
  return Object.assign(new Error(`connection closed (${event.code}${event.reason ? `: ${event.reason}` : ''})`), { closeCode: event.code });
}

/** Who signed in: the user, its roles, and the control plane's root fields those allow ("Mutation.setBalancerState", ...). */
export interface Identity {
  user: string;
  roles: Array<{ role: string; db: string }>;
  allowed: ReadonlySet<string>;
}

/** Signs in with an API key (or a control-plane token, which is one): the control plane says who it is and what it may do. */
export async function signIn(token: string): Promise<{ plane: ControlPlane; identity: Identity }> {
  const plane = new ControlPlane(token);
  try {
    const { whoAmI } = await plane.request<{ whoAmI: { user: string; roles: Identity['roles']; allowed: string[] } }>(
      '{ whoAmI { user roles { role db } allowed } }',
    );
    return { plane, identity: { user: whoAmI.user, roles: whoAmI.roles, allowed: new Set(whoAmI.allowed) } };
  } catch (error) {
    plane.close();
    throw error;
  }
}
