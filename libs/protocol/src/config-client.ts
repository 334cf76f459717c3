import type {
  CatalogCollection,
  CatalogDatabase,
  ClearJumboRequest,
  CommitMergeRequest,
  CommitMigrationRequest,
  CommitResult,
  CommitSplitRequest,
  GetChunksRequest,
  GetChunksResult,
  MarkJumboRequest,
  RecordChunkSizeEstimateRequest,
} from './catalog-messages.js';
import type { AuditEntry, AuthenticateRequest, AuthenticateResult } from './auth-messages.js';
import type { InternalClientOptions } from './internal-http-client.js';
import { SeedListClient } from './seed-list-client.js';
import type {
  DatabaseDescription,
  DropCollectionRequest,
  RenameCollectionRequest,
  DropDatabaseRequest,
  DropResult,
  EnableShardingRequest,
  MovePrimaryRequest,
  RefineShardKeyRequest,
  RemoveShardRequest,
  RemoveShardResult,
  ShardCollectionRequest,
  ShardCollectionResult,
  ShardZoneRequest,
  UpdateZoneKeyRangeRequest,
} from './ddl-messages.js';
import type { AddShardRequest, ClusterInfo, RouterDescription, RouterPingRequest, ShardDescription } from './messages.js';
import type {
  BalancerCollectionStatus,
  BalancerStatus,
  ClusterSettings,
  ForegroundLoadReport,
  MoveTopChunkRequest,
  MoveTopChunkResult,
  ConfigureCollectionBalancingRequest,
  UpdateSettingsRequest,
} from './balancer-messages.js';
import type { MigrationDecision, MoveChunkRequest, MoveRangeRequest, MoveRangeResult } from './migration-messages.js';
import type { LiveSessionsRequest, RefreshSessionsRequest, RefreshSessionsResult } from './session-messages.js';
import type { ClusterTimeKeys } from './cluster-time-keys.js';

/**
 * Typed client of the config server's internal API. `seedList` names one config process or
 * several (`http://a:7080,http://b:7080`, as a connection string names a config replica set's
 * hosts): any of them answers, and a request goes to the next when one cannot be reached.
 */
export class ConfigClient {
  private readonly http: SeedListClient;

  constructor(seedList: string, options: InternalClientOptions) {
    this.http = new SeedListClient(seedList, options);
  }

  /** The config process requests go to first now. */
  get url(): string {
    return this.http.baseUrl;
  }

  /** Creates a database (if missing) on `primaryShard` or the least loaded shard. */
  enableSharding(request: EnableShardingRequest): Promise<DatabaseDescription> {
    return this.http.call('POST', '/internal/ddl/enableSharding', request);
  }

  shardCollection(request: ShardCollectionRequest): Promise<ShardCollectionResult> {
    return this.http.call('POST', '/internal/ddl/shardCollection', request);
  }

  refineCollectionShardKey(request: RefineShardKeyRequest): Promise<ShardCollectionResult> {
    return this.http.call('POST', '/internal/ddl/refineCollectionShardKey', request);
  }

  renameCollection(request: RenameCollectionRequest): Promise<{ ok: 1 }> {
    return this.http.call('POST', '/internal/ddl/renameCollection', request);
  }

  dropCollection(request: DropCollectionRequest): Promise<DropResult> {
    return this.http.call('POST', '/internal/ddl/dropCollection', request);
  }

  dropDatabase(request: DropDatabaseRequest): Promise<DropResult> {
    return this.http.call('POST', '/internal/ddl/dropDatabase', request);
  }

  movePrimary(request: MovePrimaryRequest): Promise<DatabaseDescription> {
    return this.http.call('POST', '/internal/ddl/movePrimary', request);
  }

  /** Starts draining a shard, reports progress, and removes it when empty (call repeatedly). */
  removeShard(request: RemoveShardRequest): Promise<RemoveShardResult> {
    return this.http.call('POST', '/internal/ddl/removeShard', request);
  }

  addShardToZone(request: ShardZoneRequest): Promise<{ zones: string[] }> {
    return this.http.call('POST', '/internal/ddl/addShardToZone', request);
  }

  removeShardFromZone(request: ShardZoneRequest): Promise<{ zones: string[] }> {
    return this.http.call('POST', '/internal/ddl/removeShardFromZone', request);
  }

  /** Assigns `[min, max)` of `ns` to `zone`, or removes the range when `zone` is null. */
  updateZoneKeyRange(request: UpdateZoneKeyRangeRequest): Promise<{ ok: 1 }> {
    return this.http.call('POST', '/internal/ddl/updateZoneKeyRange', request);
  }

  /** Who leads the config servers. */
  leader(): Promise<{
    leader: { holder: string; url: string; term: number; expiresAt: string } | null;
    self: { id: string; isLeader: boolean };
  }> {
    return this.http.call('GET', '/internal/leader');
  }

  /** Adds a shard to the cluster; idempotent for the same name and URL. */
  addShard(request: AddShardRequest): Promise<ShardDescription> {
    return this.http.call('POST', '/internal/shards', request);
  }

  async listShards(): Promise<ShardDescription[]> {
    return (await this.http.call<{ shards: ShardDescription[] }>('GET', '/internal/shards')).shards;
  }

  /** Registers a router or renews its registration (MongoDB's config.mongos ping). */
  pingRouter(request: RouterPingRequest): Promise<ClusterInfo> {
    return this.http.call('POST', '/internal/routers/ping', request);
  }

  async listRouters(): Promise<RouterDescription[]> {
    return (await this.http.call<{ routers: RouterDescription[] }>('GET', '/internal/routers')).routers;
  }

  // ---- Catalog: routing reads (see apps/config/src/catalog/README.md) ----

  /** A database's entry; NAMESPACE_NOT_FOUND when it does not exist. */
  getDatabase(name: string): Promise<CatalogDatabase> {
    return this.http.call('GET', `/internal/catalog/databases/${encodeURIComponent(name)}`);
  }

  /** A sharded collection's entry with its collection version; NAMESPACE_NOT_FOUND when not sharded. */
  getCollection(ns: string): Promise<CatalogCollection> {
    return this.http.call('GET', `/internal/catalog/collections/${encodeURIComponent(ns)}`);
  }

  /** Every chunk (`full: true`), or only those newer than `sinceVersion` of the same generation (`full: false`). */
  getChunks(request: GetChunksRequest): Promise<GetChunksResult> {
    return this.http.call('POST', '/internal/catalog/chunks', request);
  }

  // ---- Catalog: metadata commits; CONFLICTING_OPERATION means re-read the version and retry ----

  commitSplit(request: CommitSplitRequest): Promise<CommitResult> {
    return this.http.call('POST', '/internal/catalog/commitSplit', request);
  }

  commitMerge(request: CommitMergeRequest): Promise<CommitResult> {
    return this.http.call('POST', '/internal/catalog/commitMerge', request);
  }

  commitMigration(request: CommitMigrationRequest): Promise<CommitResult> {
    return this.http.call('POST', '/internal/catalog/commitMigration', request);
  }

  clearJumbo(request: ClearJumboRequest): Promise<CommitResult> {
    return this.http.call('POST', '/internal/catalog/clearJumbo', request);
  }

  markJumbo(request: MarkJumboRequest): Promise<CommitResult> {
    return this.http.call('POST', '/internal/catalog/markJumbo', request);
  }

  recordChunkSizeEstimate(request: RecordChunkSizeEstimateRequest): Promise<{ ok: 1 }> {
    return this.http.call('POST', '/internal/catalog/chunkSizeEstimate', request);
  }

  // ---- Migrations ----

  /** Moves a range to another shard and answers when the migration has committed (or failed). */
  moveRange(request: MoveRangeRequest): Promise<MoveRangeResult> {
    return this.http.call('POST', '/internal/migrations/moveRange', request);
  }

  moveChunk(request: MoveChunkRequest): Promise<MoveRangeResult> {
    return this.http.call('POST', '/internal/migrations/moveChunk', request);
  }

  /**
   * The decision of a migration: `committed` if its commit landed, else it is recorded as
   * `aborted` from now on (a late commit is then refused). What a donor asks after a restart.
   */
  decideMigration(migrationId: string): Promise<{ decision: MigrationDecision }> {
    return this.http.call('POST', '/internal/migrations/decide', { migrationId });
  }

  /**
   * Says that this donor has finished migration `migrationId` by its decision (its recovery after
   * a restart, which no caller waits for): the config server's record of it goes.
   */
  migrationEnded(migrationId: string): Promise<{ ok: 1 }> {
    return this.http.call('POST', '/internal/migrations/ended', { migrationId });
  }

  /** Records a changelog entry a shard reports (migration phases and progress, range deletions). */
  reportChangelog(entry: { what: string; ns?: string; shard?: string; details?: Record<string, unknown> }): Promise<{ ok: 1 }> {
    return this.http.call('POST', '/internal/changelog', entry);
  }

  // ---- Cluster settings ----

  settings(): Promise<ClusterSettings> {
    return this.http.call('GET', '/internal/settings');
  }

  /** Changes cluster settings (balancer mode and window, default chunk size, auto-split); answers all of them. */
  updateSettings(request: UpdateSettingsRequest): Promise<ClusterSettings> {
    return this.http.call('POST', '/internal/settings', request);
  }

  configureCollectionBalancing(request: ConfigureCollectionBalancingRequest): Promise<{ ok: 1 }> {
    return this.http.call('POST', '/internal/settings/configureCollectionBalancing', request);
  }

  // ---- Balancer ----

  /** MongoDB's balancerStatus: the mode, whether a round is running, and the last round's migrations and errors. */
  balancerStatus(): Promise<BalancerStatus> {
    return this.http.call('GET', '/internal/balancer/status');
  }

  /** After splitting off the edge chunk of the key space, a shard asks the balancer to move it away (reason `topChunk`). */
  moveTopChunk(request: MoveTopChunkRequest): Promise<MoveTopChunkResult> {
    return this.http.call('POST', '/internal/balancer/moveTopChunk', request);
  }

  /** A router's foreground writes over its last window, for the balancer's throttle. */
  reportForegroundLoad(report: ForegroundLoadReport): Promise<{ ok: 1 }> {
    return this.http.call('POST', '/internal/balancer/foregroundLoad', report);
  }

  /** MongoDB's balancerCollectionStatus: whether the collection is balanced, and if not the first rule it breaks. */
  balancerCollectionStatus(ns: string): Promise<BalancerCollectionStatus> {
    return this.http.call('GET', `/internal/balancer/collectionStatus/${encodeURIComponent(ns)}`);
  }

  // ---- Access control ----

  /** Who an `Authorization` header belongs to; AUTHENTICATION_FAILED when nobody. */
  authenticate(request: AuthenticateRequest): Promise<AuthenticateResult> {
    return this.http.call('POST', '/internal/auth/authenticate', request);
  }

  /** Appends a node's audit entries to the cluster's audit log. */
  async recordAudit(entries: readonly AuditEntry[]): Promise<void> {
    await this.http.call('POST', '/internal/auth/audit', { entries });
  }

  /** The users' generation: identities cached at an older one are read again (MongoDB's user cache invalidation). */
  async authGeneration(): Promise<number> {
    return (await this.http.call<{ generation: number }>('GET', '/internal/auth/generation')).generation;
  }

  // ---- Logical sessions ----

  /** The logical session cache's refresh: upserts used sessions, removes ended ones, answers which cached ones expired. */
  refreshSessions(request: RefreshSessionsRequest): Promise<RefreshSessionsResult> {
    return this.http.call('POST', '/internal/sessions/refresh', request);
  }

  /** Which of `ids` the sessions table still holds (a shard reaps the records of the others). */
  liveSessions(request: LiveSessionsRequest): Promise<{ live: string[] }> {
    return this.http.call('POST', '/internal/sessions/live', request);
  }

  /** The keys that sign or still verify ClusterTime (the leader generates them ahead of need). */
  clusterTimeKeys(): Promise<ClusterTimeKeys> {
    return this.http.call('GET', '/internal/clusterTimeKeys');
  }
}
