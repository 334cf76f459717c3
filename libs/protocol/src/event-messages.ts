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
 * The socket.io room of the audit log: each entry as it is written, as an `audit` message (not
 * a changelog event: it has its own seq and needs viewAuditLog). History is the `auditLog` query's.
 */
export const AUDIT_ROOM = 'topic:audit';

/**
 * What an event is about, the unit clients subscribe to (socket.io rooms `topic:<name>`).
 * `sessions` is the logical sessions' (`session.*`), `transactions` their transactions' decisions
 * (`transaction.*`); `reports` is anything else a node reports.
 */
export const EVENT_TOPICS = ['placement', 'migrations', 'balancer', 'topology', 'ddl', 'sessions', 'transactions', 'reports'] as const;
export type EventTopic = (typeof EVENT_TOPICS)[number];

/** Kinds that change which chunks exist or where they live. */
const PLACEMENT_KINDS = [
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
];
const TOPOLOGY_KINDS = ['addShard', 'removeShard.start', 'removeShard', 'addShardToZone', 'removeShardFromZone'];
const DDL_KINDS = ['createDatabase', 'dropDatabase', 'movePrimary', 'shardCollection.end', 'refineCollectionShardKey', 'dropCollection'];

/** Which kinds carry a topic: these exact kinds, and every kind starting with one of these prefixes. */
export interface TopicKinds {
  kinds: readonly string[];
  prefixes: readonly string[];
}

/**
 * The kinds of each topic but `reports`, which is every kind with none of these topics. The one
 * statement of what a topic means: `topicsOfKind` reads it for a kind, and a reader of stored
 * events (the changelog query) translates it into a predicate on the kind.
 */
export const TOPIC_KINDS: Readonly<Record<Exclude<EventTopic, 'reports'>, TopicKinds>> = {
  placement: { kinds: PLACEMENT_KINDS, prefixes: [] },
  migrations: { kinds: [], prefixes: ['moveChunk.', 'moveRange.', 'migration.'] },
  balancer: { kinds: [], prefixes: ['balancer.'] },
  topology: { kinds: TOPOLOGY_KINDS, prefixes: [] },
  ddl: { kinds: DDL_KINDS, prefixes: [] },
  sessions: { kinds: [], prefixes: ['session.'] },
  transactions: { kinds: [], prefixes: ['transaction.'] },
};

function hasKind(topic: TopicKinds, kind: string): boolean {
  return topic.kinds.includes(kind) || topic.prefixes.some((p) => kind.startsWith(p));
}

/** The topics of an event kind, in `EVENT_TOPICS` order; every kind has at least one. */
export function topicsOfKind(kind: string): EventTopic[] {
  const topics: EventTopic[] = EVENT_TOPICS.filter((t) => t !== 'reports' && hasKind(TOPIC_KINDS[t], kind));
  if (topics.length === 0) topics.push('reports');
  return topics;
}

/** Whether `value` names a topic. */
export function isEventTopic(value: string): value is EventTopic {
  return (EVENT_TOPICS as readonly string[]).includes(value);
}
