/**
 * The cluster's event stream. Every changelog row is an event: catalog commits, DDL, topology
 * changes, and what shards and routers report. `seq` is cluster-wide, assigned when the row's
 * transaction commits, so a stream ordered by `seq` is in commit order and a client that resumes
 * after `seq` N misses nothing and sees nothing twice.
 */
export interface ClusterEvent {
  seq: number;
  /** ISO-8601 time of the change (its transaction's start on the config database). */
  time: string;
  /** The changelog's `what`: `split`, `moveChunk.commit`, `addShard`, ... */
  kind: string;
  topics: EventTopic[];
  ns: string | null;
  shard: string | null;
  /** The process that wrote the row (a config process, or the reporting shard or router). */
  server: string;
  details: Record<string, unknown>;
}

/**
 * What an event is about, the unit clients subscribe to (socket.io rooms `topic:<name>`).
 * `sessions` is the logical sessions' (`session.*`), `transactions` their transactions' decisions
 * (`transaction.*`); `reports` is anything else a node reports.
 */
export const EVENT_TOPICS = ['placement', 'migrations', 'balancer', 'topology', 'ddl', 'sessions', 'transactions', 'reports'] as const;
export type EventTopic = (typeof EVENT_TOPICS)[number];

/** Kinds that change which chunks exist or where they live. */
const PLACEMENT_KINDS = new Set([
  'split',
  'multi-split',
  'merge',
  'moveChunk.commit',
  'markJumbo',
  'clearJumboFlag',
  'shardCollection.end',
  'refineCollectionShardKey',
  'dropCollection',
  'updateZoneKeyRange',
  'removeZoneKeyRange',
]);
const TOPOLOGY_KINDS = new Set(['addShard', 'removeShard.start', 'removeShard', 'addShardToZone', 'removeShardFromZone']);
const DDL_KINDS = new Set([
  'createDatabase',
  'dropDatabase',
  'movePrimary',
  'shardCollection.end',
  'refineCollectionShardKey',
  'dropCollection',
]);

/** The topics of an event kind; every kind has at least one. */
export function topicsOfKind(kind: string): EventTopic[] {
  const topics: EventTopic[] = [];
  if (PLACEMENT_KINDS.has(kind)) topics.push('placement');
  if (kind.startsWith('moveChunk.') || kind.startsWith('moveRange.') || kind.startsWith('migration.')) topics.push('migrations');
  if (kind.startsWith('balancer.')) topics.push('balancer');
  if (TOPOLOGY_KINDS.has(kind)) topics.push('topology');
  if (DDL_KINDS.has(kind)) topics.push('ddl');
  if (kind.startsWith('session.')) topics.push('sessions');
  if (kind.startsWith('transaction.')) topics.push('transactions');
  if (topics.length === 0) topics.push('reports');
  return topics;
}
