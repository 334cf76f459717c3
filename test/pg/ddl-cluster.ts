import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import type { DataSource } from 'typeorm';
import { type ShardKey, TesseraError } from '@tessera/core';
import { Failpoints, VectorClockService } from '@tessera/platform';
import { FakeNetwork } from '../fakes/fake-network.js';
import { FakeShard } from '../fakes/fake-shard.js';
import { seedShardedCollection } from '../../apps/config/src/catalog/catalog-seed.js';
import { ChangelogService } from '../../apps/config/src/changelog/changelog.service.js';
import { ConfigClockService } from '../../apps/config/src/clock/config-clock.service.js';
import type { ConfigSettings } from '../../apps/config/src/config.settings.js';
import type { LeaderService } from '../../apps/config/src/leader/leader.service.js';
import { DistLockService } from '../../apps/config/src/locks/dist-lock.service.js';
import { ActiveMigrationStore } from '../../apps/config/src/migration/active-migration.store.js';
import { MigrationRecordsService } from '../../apps/config/src/migration/migration-records.service.js';
import { CollectionCatalogStore } from '../../apps/config/src/ddl/collection-catalog.store.js';
import { CollectionDdlService } from '../../apps/config/src/ddl/collection-ddl.service.js';
import { CollectionDropper } from '../../apps/config/src/ddl/collection-dropper.js';
import { DatabaseCatalogStore } from '../../apps/config/src/ddl/database-catalog.store.js';
import { DatabaseDdlService } from '../../apps/config/src/ddl/database-ddl.service.js';
import type { CoordinatorDefinition } from '../../apps/config/src/ddl/ddl-coordinator.js';
import { DdlCoordinatorService } from '../../apps/config/src/ddl/ddl-coordinator.service.js';
import { DdlCoordinatorStore } from '../../apps/config/src/ddl/ddl-coordinator.store.js';
import { DropCollectionCoordinator } from '../../apps/config/src/ddl/drop-collection.coordinator.js';
import { RenameCollectionCoordinator } from '../../apps/config/src/ddl/rename-collection.coordinator.js';
import { DropDatabaseCoordinator } from '../../apps/config/src/ddl/drop-database.coordinator.js';
import { MovePrimaryCoordinator } from '../../apps/config/src/ddl/move-primary.coordinator.js';
import { RefineShardKeyCoordinator } from '../../apps/config/src/ddl/refine-shard-key.coordinator.js';
import { ShardCollectionCoordinator } from '../../apps/config/src/ddl/shard-collection.coordinator.js';
import { ShardDirectory } from '../../apps/config/src/ddl/shard-directory.js';

/**
 * The DDL coordinators of the config server over a real config database and fake shards, for
 * `*.pg.spec.ts` files: a `DdlCluster` per test holds the shards (`FakeShard`s on a
 * `FakeNetwork`) and reads the end state back; each `ConfigProcess` is one config server with
 * its own coordinator service, locks and leader term, so a spec can crash one at a phase and let
 * another resume the coordinator, or wake a deposed one up. Only the network is fake.
 */

const silent = pino({ level: 'silent' });

/** The shards every cluster registers, by name. */
export const SHARD_URLS = { shard0: 'http://shard0.test:4001', shard1: 'http://shard1.test:4002' } as const;
export type ShardName = keyof typeof SHARD_URLS;

const settings = {
  TESSERA_NODE_NAME: 'config-test',
  TESSERA_FAILPOINTS: '',
  TESSERA_LOCK_WAIT_MS: 2_000,
  TESSERA_LOCK_TAKEOVER_MS: 30_000,
  TESSERA_LOCK_PING_INTERVAL_MS: 5_000,
  TESSERA_MIGRATION_RECORD_GRACE_MS: 10_000,
  TESSERA_MIGRATION_RECONCILE_INTERVAL_MS: 60_000,
} as ConfigSettings;

/** Everything a DDL leaves behind, without the random parts (uuids, epochs, times), for `toEqual`. */
export interface ClusterState {
  /** `name on primary (version lastMod)`. */
  databases: string[];
  collections: Record<string, { key: unknown; unique: boolean; allowMigrations: boolean; chunks: string[] }>;
  /** `what ns`, in the order written. */
  changelog: string[];
  /** `kind resource: phase`, with the error's code when it failed. */
  coordinators: string[];
  /** The resources still locked. */
  locks: string[];
  /**
   * What each shard stores by namespace; `uuid` says whether it is the collection the catalog
   * names (`catalog`), another one under a sharded namespace (`stale`), or one the catalog does
   * not know (`unsharded`).
   */
  shards: Record<ShardName, Record<string, { key: unknown; documents: number; uuid: 'catalog' | 'stale' | 'unsharded' }>>;
}

/** The outcome of a statement that a fault trigger fails. */
export type DatabaseFault =
  /** A serialization failure (40001): transient, so the phase is retried. */
  | 'transient'
  /** An internal error (XX000): the operation fails. */
  | 'permanent';

/** One test's cluster: the config database emptied, two fake shards, and the config processes it makes. */
export class DdlCluster {
  readonly network = new FakeNetwork();
  readonly shards: Record<ShardName, FakeShard>;
  private readonly clock: ConfigClockService;
  private readonly faults: string[] = [];

  private constructor(readonly dataSource: DataSource) {
    this.shards = {
      shard0: new FakeShard(this.network, SHARD_URLS.shard0),
      shard1: new FakeShard(this.network, SHARD_URLS.shard1),
    };
    this.clock = new ConfigClockService(dataSource, new VectorClockService());
  }

  /** Empties the config database, registers the two shards and answers the cluster. */
  static async start(dataSource: DataSource): Promise<DdlCluster> {
    // DELETE, not TRUNCATE: the tables hold a few rows, and TRUNCATE costs a new file per table.
    await dataSource.query(
      `DELETE FROM ddl_coordinators; DELETE FROM changelog; DELETE FROM tags; DELETE FROM migration_decisions; DELETE FROM active_migrations;
       DELETE FROM chunks; DELETE FROM collections; DELETE FROM databases; DELETE FROM shards;
       DELETE FROM locks; DELETE FROM lockpings; DELETE FROM leader_lease`,
    );
    for (const [name, url] of Object.entries(SHARD_URLS))
      await dataSource.query('INSERT INTO shards (name, url) VALUES ($1, $2)', [name, url]);
    const cluster = new DdlCluster(dataSource);
    await cluster.clock.onModuleInit();
    return cluster;
  }

  /** A config process that has not been elected yet. */
  process(): ConfigProcess {
    return new ConfigProcess(this.dataSource, this.network, this.clock);
  }

  /** A config process elected leader with the next term, its unfinished coordinators resumed. */
  async leader(): Promise<ConfigProcess> {
    const config = this.process();
    await config.elect();
    return config;
  }

  /** Waits until no coordinator is unfinished (a resumed one has run to its end) or still holds a lock. */
  async settled(timeoutMs = 5_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      // A coordinator writes its last phase, then releases its locks: settled is after both.
      const rows: Array<{ kind: string; phase: string }> = await this.dataSource.query(
        `SELECT kind, phase FROM ddl_coordinators c WHERE phase NOT IN ('done', 'failed')
            OR EXISTS (SELECT 1 FROM locks l WHERE l.operation = c.id::text)`,
      );
      if (rows.length === 0) return;
      if (Date.now() > deadline) throw new Error(`coordinators still running: ${rows.map((r) => `${r.kind} at ${r.phase}`).join(', ')}`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  /** The one coordinator's row: where a crashed leader left it. */
  async coordinator(): Promise<{ kind: string; phase: string; leader_term: number }> {
    const rows: Array<{ kind: string; phase: string; leader_term: string }> = await this.dataSource.query(
      'SELECT kind, phase, leader_term FROM ddl_coordinators ORDER BY created_at',
    );
    if (rows.length !== 1) throw new Error(`expected one coordinator, found ${rows.length}`);
    return { ...rows[0]!, leader_term: Number(rows[0]!.leader_term) };
  }

  /**
   * Makes the next `statement` on `table` fail inside Postgres, rolling back its transaction: a
   * statement-level trigger that raises once, so the phase meets a real database error.
   */
  async failNextStatement(table: string, statement: 'INSERT' | 'UPDATE' | 'DELETE', fault: DatabaseFault): Promise<void> {
    const name = `ddl_fault_${randomUUID().slice(0, 8)}`;
    const sqlstate = fault === 'transient' ? '40001' : 'XX000';
    this.faults.push(`DROP TRIGGER ${name} ON ${table}; DROP FUNCTION ${name}; DROP SEQUENCE ${name}`);
    await this.dataSource.query(`CREATE SEQUENCE ${name}`);
    await this.dataSource.query(
      `CREATE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         IF nextval('${name}') = 1 THEN RAISE EXCEPTION 'injected % fault on ${statement} ${table}', '${fault}' USING ERRCODE = '${sqlstate}'; END IF;
         RETURN NULL;
       END $$`,
    );
    await this.dataSource.query(`CREATE TRIGGER ${name} BEFORE ${statement} ON ${table} FOR EACH STATEMENT EXECUTE FUNCTION ${name}()`);
  }

  /** Checks that no coordinator was left running, and removes the injected database faults and the clock's subscription. */
  async stop(): Promise<void> {
    try {
      await this.settled();
    } finally {
      for (const fault of this.faults.splice(0)) await this.dataSource.query(fault);
      this.dataSource.subscribers.splice(this.dataSource.subscribers.indexOf(this.clock), 1);
    }
  }

  /** A database in the catalog, as enableSharding leaves it. */
  async database(name: string, primary: ShardName): Promise<void> {
    await this.dataSource.query('INSERT INTO databases (name, primary_shard, version_uuid, version_last_mod) VALUES ($1, $2, $3, 1)', [
      name,
      primary,
      randomUUID(),
    ]);
  }

  /**
   * A sharded collection as shardCollection leaves it, split at `splitPoints` into chunks owned
   * in turn by `owners`, its table on each owner holding `documents`; answers its uuid.
   */
  async shardedCollection(spec: {
    ns: string;
    key: Record<string, 1 | 'hashed'>;
    owners: ShardName[];
    splitPoints?: ShardKey[];
    documents?: number;
  }): Promise<string> {
    const { uuid } = await seedShardedCollection(this.dataSource, {
      ns: spec.ns,
      shards: spec.owners,
      keyPattern: spec.key,
      ...(spec.splitPoints === undefined ? {} : { splitPoints: spec.splitPoints }),
    });
    for (const owner of new Set(spec.owners)) {
      this.shards[owner].storeSharded(uuid, { ns: spec.ns, keyPattern: spec.key, unique: false, documents: spec.documents ?? 0 });
    }
    return uuid;
  }

  /** The end state: the catalog, the changelog, the coordinators, the locks and what the shards store. */
  async state(): Promise<ClusterState> {
    const query = <T>(sql: string): Promise<T[]> => this.dataSource.query(sql);
    const databases = await query<{ name: string; primary_shard: string; version_last_mod: number }>(
      'SELECT * FROM databases ORDER BY name',
    );
    const collections = await query<{ ns: string; uuid: string; key_pattern: unknown; is_unique: boolean; allow_migrations: boolean }>(
      'SELECT * FROM collections ORDER BY ns',
    );
    const chunks = await query<{
      collection_uuid: string;
      min_ejson: string;
      max_ejson: string;
      shard: string;
      major: number;
      minor: number;
    }>('SELECT * FROM chunks ORDER BY collection_uuid, min');
    const changelog = await query<{ what: string; ns: string | null }>('SELECT what, ns FROM changelog ORDER BY id');
    const coordinators = await query<{ kind: string; resource: string; phase: string; error: { code: string } | null }>(
      'SELECT * FROM ddl_coordinators ORDER BY created_at',
    );
    const locks = await query<{ resource: string }>('SELECT resource FROM locks ORDER BY resource');
    const catalogUuid = new Map(collections.map((c) => [c.ns, c.uuid]));
    const stored = (shard: FakeShard) =>
      Object.fromEntries(
        [...shard.collections.entries()]
          .sort(([, a], [, b]) => a.ns.localeCompare(b.ns))
          .map(([uuid, c]) => {
            const sharded = catalogUuid.get(c.ns);
            const which = sharded === undefined ? 'unsharded' : sharded === uuid ? 'catalog' : 'stale';
            return [c.ns, { key: c.keyPattern, documents: c.documents, uuid: which }] as const;
          }),
      );
    return {
      databases: databases.map((d) => `${d.name} on ${d.primary_shard} (version ${d.version_last_mod})`),
      collections: Object.fromEntries(
        collections.map((c) => [
          c.ns,
          {
            key: c.key_pattern,
            unique: c.is_unique,
            allowMigrations: c.allow_migrations,
            chunks: chunks
              .filter((k) => k.collection_uuid === c.uuid)
              .map((k) => `${readableBound(k.min_ejson)} → ${readableBound(k.max_ejson)} on ${k.shard} (${k.major}|${k.minor})`),
          },
        ]),
      ),
      changelog: changelog.map((c) => `${c.what} ${c.ns ?? ''}`.trim()),
      coordinators: coordinators.map((c) => `${c.kind} ${c.resource}: ${c.phase}${c.error === null ? '' : ` (${c.error.code})`}`),
      locks: locks.map((l) => l.resource),
      shards: { shard0: stored(this.shards.shard0), shard1: stored(this.shards.shard1) },
    };
  }
}

/**
 * How `work` failed, as `CODE message` (a database error that is no TesseraError has no code):
 * what a spec matches its expected failure against. Throws if it did not fail.
 */
export async function failureOf(work: Promise<unknown>): Promise<string> {
  const error = await work.then(
    () => {
      throw new Error('expected the operation to fail, but it succeeded');
    },
    (e: unknown) => e as Error,
  );
  return `${error instanceof TesseraError ? error.code : ''} ${error.message}`.trim();
}

/** A chunk bound's values, `MinKey`, `MaxKey` and numbers bare: `-4611686018427387904`, `(0, MinKey)`. */
function readableBound(ejson: string): string {
  const values = Object.values(JSON.parse(ejson) as Record<string, unknown>).map((v) => {
    if (typeof v !== 'object' || v === null) return JSON.stringify(v);
    if ('$minKey' in v) return 'MinKey';
    if ('$maxKey' in v) return 'MaxKey';
    if ('$numberLong' in v) return String(v.$numberLong);
    return JSON.stringify(v);
  });
  return values.length === 1 ? values[0]! : `(${values.join(', ')})`;
}

/**
 * `LeaderService` as DDL uses it: an id, the term once elected, and the `leader_lease` row that
 * the fence of every catalog transaction checks.
 */
class LeaderStandIn {
  readonly id = `config-${randomUUID().slice(0, 8)}`;
  term: number | undefined;

  register(): void {}

  async assertLeader(): Promise<number> {
    if (this.term === undefined)
      throw new TesseraError('NOT_LEADER', 'this config server is not the leader', { details: { leader: null } });
    return this.term;
  }
}

/** A process held at a phase: `reached` resolves when it gets there, `release` lets it go on. */
export interface Hold {
  reached: Promise<void>;
  release(): void;
}

/**
 * The coordinator service of a spec: the phases its coordinators ran, retries included, a short
 * backoff, and a process held (or killed) at a phase on demand.
 */
class ObservedDdlCoordinatorService extends DdlCoordinatorService {
  protected override readonly retryBackoffMs = 1;
  /** Every phase run, in order; a retried phase appears once per attempt. */
  readonly ran: string[] = [];
  private readonly holds = new Map<string, { reached: () => void; released: Promise<void> }>();

  override define<Request, State, Result>(definition: CoordinatorDefinition<Request, State, Result>): void {
    super.define<Request, State, Result>({
      ...definition,
      runPhase: async (phase, context) => {
        await this.stopAt(`before ${phase}`);
        this.ran.push(phase);
        const state = await definition.runPhase(phase, context);
        await this.stopAt(`after ${phase}`);
        return state;
      },
    });
  }

  /**
   * Holds this process when it reaches `phase`: `before` it runs (its checkpoint written), or
   * `after` its work, before the next checkpoint. A hold never released is a process that died
   * there: nothing it would still have done happens.
   */
  hold(phase: string, when: 'before' | 'after'): Hold {
    let reached!: () => void;
    let release!: () => void;
    const hold: Hold = { reached: new Promise((resolve) => (reached = resolve)), release: () => release() };
    this.holds.set(`${when} ${phase}`, { reached, released: new Promise((resolve) => (release = resolve)) });
    return hold;
  }

  /** Resolves when this process has done the work of `phase` and died, before recording the next phase. */
  crashAfter(phase: string): Promise<void> {
    return this.hold(phase, 'after').reached;
  }

  private async stopAt(point: string): Promise<void> {
    const hold = this.holds.get(point);
    if (hold === undefined) return;
    this.holds.delete(point);
    hold.reached();
    await hold.released;
  }
}

/** One config server: its own leader identity and term, locks, coordinator service and DDL entry points. */
export class ConfigProcess {
  readonly coordinators: ObservedDdlCoordinatorService;
  readonly collections: CollectionDdlService;
  readonly databases: DatabaseDdlService;
  private readonly leader = new LeaderStandIn();

  constructor(
    private readonly dataSource: DataSource,
    network: FakeNetwork,
    clock: ConfigClockService,
  ) {
    const leader = this.leader as unknown as LeaderService;
    const clients = network.internalClients();
    const changelog = new ChangelogService(settings);
    const locks = new DistLockService(dataSource, settings, silent);
    const shards = new ShardDirectory(dataSource, clients);
    const catalog = new CollectionCatalogStore(dataSource);
    const databaseCatalog = new DatabaseCatalogStore(dataSource);
    const migrationRecords = new MigrationRecordsService(
      dataSource,
      new ActiveMigrationStore(dataSource),
      changelog,
      clients,
      leader,
      settings,
      silent,
    );
    const dropper = new CollectionDropper(catalog, shards, clock, changelog, migrationRecords);
    const coordinatorRows = new DdlCoordinatorStore(dataSource);
    this.coordinators = new ObservedDdlCoordinatorService(
      dataSource,
      coordinatorRows,
      leader,
      locks,
      new Failpoints(settings, silent),
      silent,
    );
    this.databases = new DatabaseDdlService(
      dataSource,
      this.coordinators,
      leader,
      locks,
      databaseCatalog,
      shards,
      clock,
      changelog,
      silent,
    );
    this.collections = new CollectionDdlService(this.coordinators, catalog);
    new ShardCollectionCoordinator(this.coordinators, catalog, shards, this.databases, clock, changelog).onModuleInit();
    new DropCollectionCoordinator(this.coordinators, dropper).onModuleInit();
    new RenameCollectionCoordinator(this.coordinators, catalog, databaseCatalog, shards, changelog).onModuleInit();
    new DropDatabaseCoordinator(this.coordinators, databaseCatalog, shards, dropper, clock, changelog).onModuleInit();
    new MovePrimaryCoordinator(this.coordinators, coordinatorRows, databaseCatalog, shards, clock, changelog, silent).onModuleInit();
    new RefineShardKeyCoordinator(this.coordinators, catalog, shards, clock, changelog, migrationRecords, silent).onModuleInit();
  }

  /** This process's term; undefined before it is elected. */
  get term(): number | undefined {
    return this.leader.term;
  }

  /** Takes the leader lease with the next term and starts the coordinator service, which resumes unfinished coordinators. */
  async elect(): Promise<number> {
    const rows: Array<{ term: string }> = await this.dataSource.query(
      `INSERT INTO leader_lease (holder, holder_url, term, expires_at) VALUES ($1, 'http://config.test:4000', 1, now() + interval '1 minute')
       ON CONFLICT (singleton) DO UPDATE SET holder = EXCLUDED.holder, term = leader_lease.term + 1, expires_at = EXCLUDED.expires_at
       RETURNING term`,
      [this.leader.id],
    );
    const term = Number(rows[0]!.term);
    this.leader.term = term;
    await this.coordinators.startAsLeader(term);
    return term;
  }
}
