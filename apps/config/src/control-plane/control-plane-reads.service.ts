import { Injectable } from '@nestjs/common';
import DataLoader from 'dataloader';
import { DataSource } from 'typeorm';
import {
  type Chunk,
  type ClusterTimestamp,
  type ShardKey,
  TesseraError,
  type Value,
  type ValueObject,
  encodeKey,
  fromExtendedJsonObject,
  shardAtClusterTime,
  shardKeyFromObject,
} from '@tessera/core';
import { EVENT_TOPICS, TOPIC_KINDS, isEventTopic, shardKeyToWire } from '@tessera/protocol';
import { InternalClients } from '@tessera/platform';
import { findCollection } from '../catalog/catalog-read.service.js';
import {
  type ChunkRow,
  type CollectionRow,
  type DatabaseRow,
  chunkFromRow,
  generationOfRow,
  keyPatternOfRow,
} from '../catalog/catalog-rows.js';
import { type ChangelogRow, eventOfRow } from '../changelog/changelog.service.js';
import { DdlCoordinatorStore } from '../ddl/ddl-coordinator.store.js';
import type {
  ChunkConnectionType,
  ChunkType,
  CollectionType,
  DatabaseType,
  DdlOperationType,
  EventConnectionType,
  MigrationsType,
  SettingType,
  ShardDistributionType,
  ShardStatisticsType,
  ZoneRangeType,
} from './graphql-types.js';

/** Per-request batch loaders, so a list of shards or databases costs one query per field, not one per row. */
export interface ControlPlaneLoaders {
  shardStatistics: DataLoader<string, ShardStatisticsType>;
  collectionsOfDatabase: DataLoader<string, CollectionType[]>;
}

export const MAX_PAGE = 1_000;
/** How long a database's primary shard is given to list its collections. */
const PRIMARY_TIMEOUT_MS = 5_000;

/**
 * The control plane's reads of the catalog. Straight SQL on the config database, shaped for the
 * GraphQL types; each method is one or two statements whatever the size of the answer.
 */
@Injectable()
export class ControlPlaneReadsService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly clients: InternalClients,
    private readonly coordinators: DdlCoordinatorStore,
  ) {}

  loaders(): ControlPlaneLoaders {
    return {
      shardStatistics: new DataLoader(async (shards) => {
        const rows: Array<{ shard: string; chunks: number; bytes: number }> = await this.dataSource.query(
          `SELECT shard, count(*)::int AS chunks, coalesce(sum(estimated_size_bytes), 0)::float8 AS bytes
             FROM chunks WHERE shard = ANY($1) GROUP BY shard`,
          [shards],
        );
        const byShard = new Map(rows.map((r) => [r.shard, r]));
        return shards.map((s) => ({ chunks: byShard.get(s)?.chunks ?? 0, estimatedDataBytes: byShard.get(s)?.bytes ?? 0 }));
      }),
      collectionsOfDatabase: new DataLoader(async (dbs) => {
        const rows: CollectionRow[] = await this.dataSource.query('SELECT * FROM collections WHERE db = ANY($1) ORDER BY ns', [dbs]);
        const versions = await this.collectionVersions(rows.map((r) => r.uuid));
        const unsharded = await this.unshardedNamespaces(dbs);
        return dbs.map((db) => {
          const sharded = rows.filter((r) => r.db === db).map((r) => collectionOfRow(r, versions.get(r.uuid) ?? '0|0'));
          const others = (unsharded.get(db) ?? []).filter((ns) => !sharded.some((c) => c.ns === ns)).map((ns) => unshardedCollection(ns));
          return [...sharded, ...others].sort((a, b) => a.ns.localeCompare(b.ns));
        });
      }),
    };
  }

  /**
   * The collections each database's primary shard stores (the config catalog knows sharded ones
   * only, as MongoDB's config.collections): asked of the primary shards, one request each.
   */
  private async unshardedNamespaces(dbs: readonly string[]): Promise<Map<string, string[]>> {
    const rows: Array<{ name: string; url: string }> = await this.dataSource.query(
      'SELECT d.name, s.url FROM databases d JOIN shards s ON s.name = d.primary_shard WHERE d.name = ANY($1)',
      [dbs],
    );
    const answers = await Promise.all(
      rows.map(async (r) => [r.name, await this.clients.shard(r.url, PRIMARY_TIMEOUT_MS).namespacesOf(r.name)] as const),
    );
    return new Map(answers);
  }

  async databases(): Promise<DatabaseType[]> {
    const rows: DatabaseRow[] = await this.dataSource.query('SELECT * FROM databases ORDER BY name');
    return rows.map((r) => ({
      name: r.name,
      primaryShard: r.primary_shard,
      versionUuid: r.version_uuid,
      versionLastMod: r.version_last_mod,
    }));
  }

  async zoneRanges(ns?: string): Promise<ZoneRangeType[]> {
    const rows: Array<{ ns: string; min_ejson: string; max_ejson: string; tag: string }> =
      ns === undefined
        ? await this.dataSource.query('SELECT ns, min_ejson, max_ejson, tag FROM tags ORDER BY ns, min')
        : await this.dataSource.query('SELECT ns, min_ejson, max_ejson, tag FROM tags WHERE ns = $1 ORDER BY min', [ns]);
    return rows.map((r) => ({ ns: r.ns, min: r.min_ejson, max: r.max_ejson, zone: r.tag }));
  }

  /** Throws `NAMESPACE_NOT_FOUND` when `ns` is not a sharded collection. */
  async collection(ns: string): Promise<CollectionType> {
    const row = await findCollection(this.dataSource.manager, ns);
    const versions = await this.collectionVersions([row.uuid]);
    return collectionOfRow(row, versions.get(row.uuid) ?? '0|0');
  }

  /** A page of chunks in key order, optionally on one shard; `after` is the previous page's `endCursor`. */
  async chunks(ns: string, options: { first: number; after?: string; shard?: string }): Promise<ChunkConnectionType> {
    const row = await findCollection(this.dataSource.manager, ns);
    const first = Math.min(Math.max(options.first, 1), MAX_PAGE);
    const where = ['collection_uuid = $1'];
    const parameters: unknown[] = [row.uuid];
    if (options.shard !== undefined) {
      parameters.push(options.shard);
      where.push(`shard = $${parameters.length}`);
    }
    const countRows: Array<{ n: number }> = await this.dataSource.query(
      `SELECT count(*)::int AS n FROM chunks WHERE ${where.join(' AND ')}`,
      parameters,
    );
    if (options.after !== undefined) {
      parameters.push(Buffer.from(options.after, 'base64url'));
      where.push(`min > $${parameters.length}`);
    }
    parameters.push(first + 1);
    const rows: ChunkRow[] = await this.dataSource.query(
      `SELECT * FROM chunks WHERE ${where.join(' AND ')} ORDER BY min LIMIT $${parameters.length}`,
      parameters,
    );
    const page = rows.slice(0, first);
    const generation = generationOfRow(row);
    const last = page[page.length - 1];
    return {
      nodes: page.map((r) => chunkTypeOf(chunkFromRow(r, generation), r)),
      pageInfo: { hasNextPage: rows.length > first, endCursor: last === undefined ? null : Buffer.from(last.min).toString('base64url') },
      totalCount: countRows[0]?.n ?? 0,
    };
  }

  async distribution(ns: string): Promise<ShardDistributionType[]> {
    const row = await findCollection(this.dataSource.manager, ns);
    const rows: Array<{ shard: string; chunks: number; estimated: number; bytes: number; documents: number | null; jumbo: number }> =
      await this.dataSource.query(
        `SELECT shard, count(*)::int AS chunks, count(estimated_size_bytes)::int AS estimated, count(*) FILTER (WHERE jumbo)::int AS jumbo,
                coalesce(sum(estimated_size_bytes), 0)::float8 AS bytes, sum(estimated_documents)::float8 AS documents
           FROM chunks WHERE collection_uuid = $1 GROUP BY shard ORDER BY shard`,
        [row.uuid],
      );
    return rows.map((r) => ({
      shard: r.shard,
      chunks: r.chunks,
      estimatedDataBytes: r.bytes,
      documents: r.documents,
      estimatedChunks: r.estimated,
      jumboChunks: r.jumbo,
    }));
  }

  /**
   * The chunk holding `key` (an object naming every shard key field, Extended JSON values), and
   * with `atClusterTime` the shard that owned it then. Throws `NAMESPACE_NOT_FOUND`, `BAD_VALUE`
   * (a key that does not match the pattern), `STALE_CHUNK_HISTORY` (a time older than the history).
   */
  async chunkForKey(ns: string, key: unknown, atClusterTime?: ClusterTimestamp): Promise<ChunkType> {
    const row = await findCollection(this.dataSource.manager, ns);
    if (typeof key !== 'object' || key === null || Array.isArray(key)) {
      throw new TesseraError('BAD_VALUE', `key must be an object naming the shard key fields of ${ns}`, { details: { ns } });
    }
    const pattern = keyPatternOfRow(row);
    const shardKey = shardKeyFromObject(pattern, fromExtendedJsonObject(key) as ValueObject as Readonly<Record<string, Value>>);
    const { chunk, found } = await this.holding(row, shardKey);
    const typed = chunkTypeOf(chunk, found);
    return atClusterTime === undefined ? typed : { ...typed, shard: shardAtClusterTime(chunk, atClusterTime) };
  }

  /** The chunk holding `key` (the last chunk starting at or below it), through the min index. */
  async chunkHolding(ns: string, key: ShardKey): Promise<Chunk> {
    return (await this.holding(await findCollection(this.dataSource.manager, ns), key)).chunk;
  }

  private async holding(row: CollectionRow, key: ShardKey): Promise<{ chunk: Chunk; found: ChunkRow }> {
    const rows: ChunkRow[] = await this.dataSource.query(
      'SELECT * FROM chunks WHERE collection_uuid = $1 AND min <= $2 ORDER BY min DESC LIMIT 1',
      [row.uuid, Buffer.from(encodeKey(key))],
    );
    const found = rows[0];
    if (found === undefined) throw new TesseraError('INTERNAL', `no chunk of ${row.ns} holds the key`, { details: { ns: row.ns } });
    return { chunk: chunkFromRow(found, generationOfRow(row)), found };
  }

  /**
   * Changelog entries after `after` (a seq), oldest first, filtered by namespace, kinds, topics
   * (an entry matches when one of its topics is listed) and time. Throws `BAD_VALUE` for a topic
   * that does not exist.
   */
  async changelog(options: {
    ns?: string;
    kinds?: string[];
    topics?: string[];
    from?: string;
    to?: string;
    after?: number;
    first: number;
  }): Promise<EventConnectionType> {
    const first = Math.min(Math.max(options.first, 1), MAX_PAGE);
    const where = ['seq IS NOT NULL'];
    const parameters: unknown[] = [];
    const add = (sql: string, value: unknown) => {
      parameters.push(value);
      where.push(sql.replace('?', `$${parameters.length}`));
    };
    if (options.after !== undefined) add('seq > ?', options.after);
    if (options.ns !== undefined) add('ns = ?', options.ns);
    if (options.kinds !== undefined) add('what = ANY(?)', options.kinds);
    if (options.topics !== undefined) {
      const { kinds, patterns, reports } = kindsOfTopics(options.topics);
      const selects = [`what = ANY($${parameters.push(kinds)}::text[])`, `what LIKE ANY($${parameters.push(patterns)}::text[])`];
      if (reports) {
        // `reports` is every kind with no other topic: outside the union of all the others.
        const all = kindsOfTopics(EVENT_TOPICS.filter((t) => t !== 'reports'));
        selects.push(
          `NOT (what = ANY($${parameters.push(all.kinds)}::text[]) OR what LIKE ANY($${parameters.push(all.patterns)}::text[]))`,
        );
      }
      where.push(`(${selects.join(' OR ')})`);
    }
    if (options.from !== undefined) add('time >= ?', parseTime(options.from, 'from'));
    if (options.to !== undefined) add('time < ?', parseTime(options.to, 'to'));
    parameters.push(first + 1);
    const rows: ChangelogRow[] = await this.dataSource.query(
      `SELECT * FROM changelog WHERE ${where.join(' AND ')} ORDER BY seq LIMIT $${parameters.length}`,
      parameters,
    );
    const page = rows.slice(0, first).map(eventOfRow);
    const last = page[page.length - 1];
    return { nodes: page, pageInfo: { hasNextPage: rows.length > first, endCursor: last === undefined ? null : String(last.seq) } };
  }

  /**
   * Migrations in flight (the active_migrations registry, with the chunk's size estimate, and the
   * size the donor measured at the start, the last phase and progress each donor reported) and
   * the last `recent` that ended (the donors' moveChunk.from and moveChunk.error reports, with how
   * long each phase took). Three statements in all.
   */
  async migrations(ns: string | undefined, recent: number): Promise<MigrationsType> {
    // A migration's range is exactly one chunk (commitMigration refuses anything else), the one
    // starting at its min.
    const active: ActiveMigrationRow[] = await this.dataSource.query(
      `SELECT a.id, a.ns, a.min_ejson, a.max_ejson, a.donor, a.recipient, a.started_at, c.estimated_size_bytes, c.estimated_documents
         FROM active_migrations a LEFT JOIN chunks c ON c.collection_uuid = a.collection_uuid AND c.min = a.min
        WHERE $1::text IS NULL OR a.ns = $1 ORDER BY a.started_at`,
      [ns ?? null],
    );
    const reports: Array<{ id: string; what: string; details: Record<string, unknown> }> =
      active.length === 0
        ? []
        : await this.dataSource.query(
            `SELECT DISTINCT ON (details->>'migrationId', what) details->>'migrationId' AS id, what, details FROM changelog
              WHERE what IN ('moveChunk.start', 'moveChunk.phase', 'moveChunk.progress') AND details->>'migrationId' = ANY($1)
              ORDER BY details->>'migrationId', what, seq DESC`,
            [active.map((a) => a.id)],
          );
    const report = (id: string, what: string) => reports.find((r) => r.id === id && r.what === what)?.details;
    const ended: ChangelogRow[] = await this.dataSource.query(
      `SELECT * FROM changelog WHERE what IN ('moveChunk.from', 'moveChunk.error') AND ($1::text IS NULL OR ns = $1)
        ORDER BY seq DESC LIMIT $2`,
      [ns ?? null, Math.min(Math.max(recent, 0), MAX_PAGE)],
    );
    return {
      active: active.map((a) =>
        activeMigrationOf(a, report(a.id, 'moveChunk.start'), report(a.id, 'moveChunk.phase'), report(a.id, 'moveChunk.progress')),
      ),
      recent: ended.map(endedMigrationOf),
    };
  }

  /** The DDL coordinators still running, oldest first, then the `recent` last ended, newest first. */
  async ddlOperations(recent: number): Promise<DdlOperationType[]> {
    const rows = await this.coordinators.listed(Math.min(Math.max(recent, 0), MAX_PAGE));
    return rows.map((r) => ({
      id: r.id,
      kind: r.kind,
      resource: r.resource,
      phase: r.phase,
      request: r.request,
      state: r.state,
      error: r.error,
      startedAt: r.created_at.toISOString(),
      updatedAt: r.updated_at.toISOString(),
    }));
  }

  async settings(): Promise<SettingType[]> {
    const rows: Array<{ key: string; value: unknown; updated_at: Date }> = await this.dataSource.query(
      'SELECT key, value, updated_at FROM settings ORDER BY key',
    );
    return rows.map((r) => ({ key: r.key, value: r.value, updatedAt: r.updated_at.toISOString() }));
  }

  /** The collection version `major|minor` of each collection, one statement for all. */
  private async collectionVersions(uuids: string[]): Promise<Map<string, string>> {
    const rows: Array<{ collection_uuid: string; major: number; minor: number }> = await this.dataSource.query(
      `SELECT DISTINCT ON (collection_uuid) collection_uuid, major, minor FROM chunks
        WHERE collection_uuid = ANY($1) ORDER BY collection_uuid, major DESC, minor DESC`,
      [uuids],
    );
    return new Map(rows.map((r) => [r.collection_uuid, `${r.major}|${r.minor}`]));
  }
}

function collectionOfRow(row: CollectionRow, collectionVersion: string): CollectionType {
  return {
    ns: row.ns,
    sharded: true,
    uuid: row.uuid,
    epoch: row.epoch,
    keyPattern: row.key_pattern,
    unique: row.is_unique,
    balancingEnabled: row.balancing_enabled,
    autoMergingEnabled: row.auto_merging_enabled,
    defragmenting: row.defragment_collection,
    chunkSizeBytes: row.max_chunk_size_bytes === null ? null : Number(row.max_chunk_size_bytes),
    allowMigrations: row.allow_migrations,
    collectionVersion,
  };
}

/** A collection the catalog does not track: unsharded, on its database's primary shard. */
function unshardedCollection(ns: string): CollectionType {
  return {
    ns,
    sharded: false,
    uuid: null,
    epoch: null,
    keyPattern: null,
    unique: false,
    balancingEnabled: false,
    autoMergingEnabled: false,
    defragmenting: false,
    chunkSizeBytes: null,
    allowMigrations: false,
    collectionVersion: null,
  };
}

/** A catalog chunk as the GraphQL type, with the row's size estimate. */
export function chunkTypeOf(chunk: Chunk, row?: Pick<ChunkRow, 'estimated_size_bytes' | 'estimated_documents'>): ChunkType {
  return {
    min: shardKeyToWire(chunk.range.min),
    max: shardKeyToWire(chunk.range.max),
    shard: chunk.shard,
    version: `${chunk.version.major}|${chunk.version.minor}`,
    jumbo: chunk.jumbo === true,
    estimatedSizeBytes: row?.estimated_size_bytes == null ? null : Number(row.estimated_size_bytes),
    estimatedDocuments: row?.estimated_documents == null ? null : Number(row.estimated_documents),
    history: chunk.history,
  };
}

/**
 * The kinds the topics select, as exact kinds and LIKE patterns on the kind (from `TOPIC_KINDS`,
 * which `topicsOfKind` reads too, so the query and the live streams agree on every kind), and
 * whether `reports` is among them.
 */
function kindsOfTopics(topics: readonly string[]): { kinds: string[]; patterns: string[]; reports: boolean } {
  const unknown = topics.filter((t) => !isEventTopic(t));
  if (unknown.length > 0) {
    throw new TesseraError('BAD_VALUE', `unknown topic ${unknown.join(', ')}; the topics are ${EVENT_TOPICS.join(', ')}`, {
      details: { topics: unknown },
    });
  }
  const kinds: string[] = [];
  const patterns: string[] = [];
  for (const topic of topics) {
    if (!isEventTopic(topic) || topic === 'reports') continue;
    kinds.push(...TOPIC_KINDS[topic].kinds);
    patterns.push(...TOPIC_KINDS[topic].prefixes.map((p) => `${p.replace(/[\\%_]/g, '\\$&')}%`));
  }
  return { kinds, patterns, reports: topics.includes('reports') };
}

function numberOrNull(value: unknown): number | null {
  return typeof value === 'number' ? value : null;
}

function parseTime(value: string, name: string): Date {
  const time = new Date(value);
  if (Number.isNaN(time.getTime())) throw new TesseraError('BAD_VALUE', `${name} must be an ISO-8601 time, got "${value}"`);
  return time;
}

interface ActiveMigrationRow {
  id: string;
  ns: string;
  min_ejson: string;
  max_ejson: string;
  donor: string;
  recipient: string;
  started_at: Date;
  estimated_size_bytes: string | null;
  estimated_documents: string | null;
}

/**
 * A migration in flight, with the last phase and cloning progress its donor reported, and the
 * range's size: the donor's measurement at the start (exact when taken) over the catalog's
 * estimate (as old as the chunk's last test), which stands in until that report arrives.
 */
function activeMigrationOf(
  a: ActiveMigrationRow,
  start: Record<string, unknown> | undefined,
  phase: Record<string, unknown> | undefined,
  progress: Record<string, unknown> | undefined,
) {
  const measured = numberOrNull(start?.bytes) !== null;
  return {
    migrationId: a.id,
    ns: a.ns,
    min: a.min_ejson,
    max: a.max_ejson,
    donor: a.donor,
    recipient: a.recipient,
    startedAt: a.started_at.toISOString(),
    phase: String(phase?.phase ?? 'registered'),
    documentsCloned: numberOrNull(progress?.documentsCloned),
    bytesCloned: numberOrNull(progress?.bytesCloned),
    estimatedBytes: measured ? numberOrNull(start?.bytes) : a.estimated_size_bytes === null ? null : Number(a.estimated_size_bytes),
    estimatedDocuments: measured ? numberOrNull(start?.documents) : a.estimated_documents === null ? null : Number(a.estimated_documents),
  };
}

/** A migration that ended, from its donor's moveChunk.from or moveChunk.error report, with how long each phase took. */
function endedMigrationOf(row: ChangelogRow) {
  const d = row.details;
  const phases = Array.isArray(d.phases) ? (d.phases as Array<{ phase: string; at: string }>) : [];
  return {
    seq: Number(row.seq),
    migrationId: typeof d.migrationId === 'string' ? d.migrationId : null,
    ns: row.ns ?? '',
    min: d.min ?? null,
    max: d.max ?? null,
    donor: String(d.from ?? row.shard ?? ''),
    recipient: String(d.to ?? ''),
    outcome: row.what === 'moveChunk.from' ? 'committed' : 'failed',
    endedAt: new Date(row.time).toISOString(),
    error: typeof d.error === 'string' ? d.error : null,
    documentsCloned: numberOrNull(d.documentsCloned),
    bytesCloned: numberOrNull(d.bytesCloned),
    criticalSectionMs: numberOrNull(d.criticalSectionMs),
    phases: phases.map((p, i) => ({
      phase: p.phase,
      startedAt: p.at,
      ms: phases[i + 1] === undefined ? null : Date.parse(phases[i + 1]!.at) - Date.parse(p.at),
    })),
  };
}
