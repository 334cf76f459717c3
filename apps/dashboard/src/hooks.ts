import { createContext, useCallback, useContext, useEffect, useRef, useState } from 'react';
import type { ConnectionState, ControlPlane, Identity } from './api';

export interface Signed {
  plane: ControlPlane;
  identity: Identity;
}

export const SignedContext = createContext<Signed | null>(null);

export function useSigned(): Signed {
  const signed = useContext(SignedContext);
  if (signed === null) throw new Error('useSigned outside a signed-in page');
  return signed;
}

export interface QueryState<T> {
  data: T | undefined;
  error: Error | undefined;
  loading: boolean;
  refetch: () => void;
}

/**
 * A query run on mount and whenever `refetch` is called or `deps` change. Refetches triggered
 * while one is in flight are coalesced into one more run, so a burst of events costs two queries.
 */
export function useQuery<T>(query: string, variables: Record<string, unknown> = {}, deps: unknown[] = []): QueryState<T> {
  const { plane } = useSigned();
  const [state, setState] = useState<{ data?: T; error?: Error; loading: boolean }>({ loading: true });
  const running = useRef(false);
  const again = useRef(false);
  const current = useRef({ query, variables });
  current.current = { query, variables };
  const alive = useRef(true);

  const run = useCallback(() => {
    if (running.current) {
      again.current = true;
      return;
    }
    running.current = true;
    plane
      .request<T>(current.current.query, current.current.variables)
      .then(
        (data) => alive.current && setState({ data, loading: false }),
        (error: Error) => alive.current && setState((s) => ({ ...s, error, loading: false })),
      )
      .finally(() => {
        running.current = false;
        if (again.current) {
          again.current = false;
          run();
        }
      });
  }, [plane]);

  useEffect(() => {
    alive.current = true;
    run();
    return () => {
      alive.current = false;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [run, JSON.stringify(variables), ...deps]);

  return { data: state.data, error: state.error, loading: state.loading, refetch: run };
}

/** An event of the changelog as every stream delivers it. */
export interface ClusterEvent {
  seq: number;
  kind: string;
  ns: string | null;
  shard: string | null;
  server: string;
  time: string;
  topics: string[];
  details: Record<string, unknown>;
}

export const EVENT_FIELDS = 'seq kind ns shard server time topics details';

/**
 * `ControlPlane.stream` for a component, from the first `since` it is given (undefined: not yet
 * known) until unmount; later values of `since` (refetches) do not restart it.
 */
export function useStream<T extends { seq: number }>(
  query: string,
  field: string,
  variables: Record<string, unknown>,
  since: number | undefined,
  onEvent: (item: T) => void,
): Error | undefined {
  const { plane } = useSigned();
  const handler = useRef(onEvent);
  handler.current = onEvent;
  const [error, setError] = useState<Error>();
  const key = JSON.stringify(variables);
  const [start, setStart] = useState(since);
  if (start === undefined && since !== undefined) setStart(since);

  useEffect(() => {
    if (start === undefined) return;
    setError(undefined);
    return plane.stream<T>(query, field, variables, start, (item) => handler.current(item), setError);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [plane, query, field, key, start]);

  return error;
}

export function useConnectionState(): ConnectionState {
  const { plane } = useSigned();
  const [state, setState] = useState(plane.state);
  useEffect(() => plane.onStateChange(setState), [plane]);
  return state;
}
