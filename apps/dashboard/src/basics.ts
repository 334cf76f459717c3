import { useQuery } from './hooks';

interface Basics {
  cluster: {
    lastEventSeq: number;
    shards: Array<{ name: string; state: string }>;
    databases: Array<{ name: string; collections: Array<{ ns: string; sharded: boolean }> }>;
  };
}

/** Shard names (in order, for colours) and the sharded collections, for the per-collection views. */
export function useBasics(deps: unknown[] = []) {
  const q = useQuery<Basics>('{ cluster { lastEventSeq shards { name state } databases { name collections { ns sharded } } } }', {}, deps);
  const shards = (q.data?.cluster.shards ?? []).map((s) => s.name).sort();
  const namespaces = (q.data?.cluster.databases ?? []).flatMap((d) => d.collections.filter((c) => c.sharded).map((c) => c.ns)).sort();
  return { ...q, shards, namespaces };
}
