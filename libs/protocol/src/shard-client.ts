import type { InternalClientOptions } from './internal-http-client.js';
import { InternalHttpClient } from './internal-http-client.js';
import type {
  CountCommand,
  CreateIndexesCommand,
  CreateIndexesResult,
  DropIndexesCommand,
  DropIndexesResult,
  ListIndexesCommand,
  ListedIndex,
  CursorBatch,
  DeleteCommand,
  DeleteCommandResult,
  DistinctCommand,
  AggregateCommand,
  FindAndModifyCommand,
  FindAndModifyResult,
  FindCommand,
  GetMoreCommand,
  InsertCommand,
  InsertCommandResult,
  UpdateCommand,
  UpdateCommandResult,
} from './data-messages.js';
import type {
  CloneCatalogData,
  CloneCatalogDataStatus,
  CloneRowsRequest,
  CloneSource,
  CollectionSessionHistoryRequest,
  DropStaleData,
  EnterDatabaseCriticalSection,
  ExitDatabaseCriticalSection,
} from './ddl-messages.js';
import type { SessionHistoryBatch } from './migration-messages.js';
import type { ShardCollectionSpec, ShardIdentity, ShardIdentityResponse, ShardStats } from './messages.js';
import type { ClusterTimestamp } from '@tessera/core';
import type {
  AbortTransaction,
  CommitTransaction,
  CoordinateCommit,
  DecisionAnswer,
  PrepareTransaction,
  PrepareVote,
  ResolveOutcome,
  ShardTransactions,
  TransactionDecision,
  TransactionId,
} from './transaction-messages.js';

/** Typed client of a shard's internal API. */
export class ShardClient {
  private readonly http: InternalHttpClient;

  constructor(baseUrl: string, options: InternalClientOptions) {
    this.http = new InternalHttpClient(baseUrl, options);
  }

  get url(): string {
    return this.http.baseUrl;
  }

  getIdentity(): Promise<ShardIdentityResponse> {
    return this.http.call('GET', '/internal/identity');
  }

  /** Makes the shard a member of a cluster; refused if it belongs to another one. */
  setIdentity(identity: ShardIdentity): Promise<ShardIdentityResponse> {
    return this.http.call('PUT', '/internal/identity', identity);
  }

  /** Creates a collection's table and shard key index on the shard (idempotent). */
  async createCollection(uuid: string, spec: ShardCollectionSpec): Promise<void> {
    await this.http.call('PUT', `/internal/collections/${uuid}`, spec);
  }

  /** Drops a collection's table (idempotent). */
  async dropCollection(uuid: string): Promise<void> {
    await this.http.call('DELETE', `/internal/collections/${uuid}`);
  }

  /** Re-keys a collection's documents for a refined shard key. */
  refineShardKey(uuid: string, keyPattern: Record<string, 1 | 'hashed'>): Promise<{ rekeyed: number }> {
    return this.http.call('POST', `/internal/collections/${uuid}/refine`, { keyPattern });
  }

  /** Renames an unsharded collection, dropping the target first when `dropTarget` (idempotent); answers whether it is there. */
  renameCollection(uuid: string, to: string, dropTarget: boolean): Promise<{ renamed: boolean }> {
    return this.http.call('POST', `/internal/collections/${uuid}/rename`, { to, dropTarget });
  }

  /** The collection the shard stores under `ns`; `NAMESPACE_NOT_FOUND` if none. */
  describeNamespace(ns: string): Promise<{ uuid: string; keyPattern: Record<string, 1 | 'hashed'>; documents: number }> {
    return this.http.call('GET', `/internal/namespaces/${encodeURIComponent(ns)}`);
  }

  /** Drops the collection stored under `ns`, sharded or not (idempotent). */
  dropNamespace(ns: string): Promise<{ dropped: boolean }> {
    return this.http.call('DELETE', `/internal/namespaces/${encodeURIComponent(ns)}`);
  }

  /** The namespaces the shard stores for a database, sharded or not. */
  async namespacesOf(db: string): Promise<string[]> {
    return (await this.http.call<{ namespaces: string[] }>('GET', `/internal/databases/${encodeURIComponent(db)}/namespaces`)).namespaces;
  }

  /** Drops every collection of a database on the shard (idempotent). */
  dropDatabase(db: string): Promise<{ dropped: number }> {
    return this.http.call('DELETE', `/internal/databases/${encodeURIComponent(db)}`);
  }

  // ---- movePrimary ----

  /** Donor: takes the database's critical section for unsharded collections (persisted; idempotent per reason). */
  async enterDatabaseCriticalSection(db: string, request: EnterDatabaseCriticalSection): Promise<void> {
    await this.http.call('POST', `/internal/databases/${encodeURIComponent(db)}/enterCriticalSection`, request);
  }

  /** Donor: releases the database's critical section held for the reason (idempotent). */
  async exitDatabaseCriticalSection(db: string, request: ExitDatabaseCriticalSection): Promise<void> {
    await this.http.call('POST', `/internal/databases/${encodeURIComponent(db)}/exitCriticalSection`, request);
  }

  /** Recipient: starts or joins the clone of the donor's unsharded collections; answers within a few seconds with its progress. */
  cloneCatalogData(db: string, request: CloneCatalogData): Promise<CloneCatalogDataStatus> {
    return this.http.call('POST', `/internal/databases/${encodeURIComponent(db)}/cloneCatalogData`, request);
  }

  /** Donor: drops the collections a committed movePrimary took away (idempotent). */
  dropStaleData(db: string, request: DropStaleData): Promise<{ dropped: number }> {
    return this.http.call('POST', `/internal/databases/${encodeURIComponent(db)}/dropStaleData`, request);
  }

  /** Donor: an unsharded collection's uuid, key pattern and secondary indexes; `NAMESPACE_NOT_FOUND` if none. */
  cloneSource(ns: string): Promise<CloneSource> {
    return this.http.call('GET', `/internal/namespaces/${encodeURIComponent(ns)}/cloneSource`);
  }

  /** Donor: the collection's next rows in `_id` order, as COPY text. */
  cloneRows(ns: string, request: CloneRowsRequest): Promise<string> {
    return this.http.callText('POST', `/internal/namespaces/${encodeURIComponent(ns)}/cloneRows`, request);
  }

  /** Donor: a page of the collection's retry history (sessions in lsid order), as a migration's `sessionHistory`. */
  collectionSessionHistory(ns: string, request: CollectionSessionHistoryRequest): Promise<SessionHistoryBatch> {
    return this.http.call('POST', `/internal/namespaces/${encodeURIComponent(ns)}/sessionHistory`, request);
  }

  stats(): Promise<ShardStats> {
    return this.http.call('GET', '/internal/stats');
  }

  // ---- Versioned data commands ----

  insert(command: InsertCommand): Promise<InsertCommandResult> {
    return this.http.call('POST', '/internal/data/insert', command);
  }

  find(command: FindCommand): Promise<CursorBatch> {
    return this.http.call('POST', '/internal/data/find', command);
  }

  aggregate(command: AggregateCommand): Promise<CursorBatch> {
    return this.http.call('POST', '/internal/data/aggregate', command);
  }

  getMore(command: GetMoreCommand): Promise<CursorBatch> {
    return this.http.call('POST', '/internal/data/getMore', command);
  }

  killCursors(cursorIds: string[]): Promise<{ killed: string[]; notFound: string[] }> {
    return this.http.call('POST', '/internal/data/killCursors', { cursorIds });
  }

  update(command: UpdateCommand): Promise<UpdateCommandResult> {
    return this.http.call('POST', '/internal/data/update', command);
  }

  delete(command: DeleteCommand): Promise<DeleteCommandResult> {
    return this.http.call('POST', '/internal/data/delete', command);
  }

  findAndModify(command: FindAndModifyCommand): Promise<FindAndModifyResult> {
    return this.http.call('POST', '/internal/data/findAndModify', command);
  }

  count(command: CountCommand): Promise<{ n: number }> {
    return this.http.call('POST', '/internal/data/count', command);
  }

  /** Makes the shard reload its filtering metadata of `ns` (after a migration commit it took part in). */
  refreshMetadata(ns: string): Promise<{ shardVersion: unknown }> {
    return this.http.call('POST', '/internal/data/refreshMetadata', { ns });
  }

  distinct(command: DistinctCommand): Promise<{ values: unknown[] }> {
    return this.http.call('POST', '/internal/data/distinct', command);
  }

  createIndexes(command: CreateIndexesCommand): Promise<CreateIndexesResult> {
    return this.http.call('POST', '/internal/data/createIndexes', command);
  }

  /** The collection's indexes on this shard; empty when the shard has no table for it. */
  listIndexes(command: ListIndexesCommand): Promise<{ indexes: ListedIndex[] }> {
    return this.http.call('POST', '/internal/data/listIndexes', command);
  }

  dropIndexes(command: DropIndexesCommand): Promise<DropIndexesResult> {
    return this.http.call('POST', '/internal/data/dropIndexes', command);
  }

  // ---- Transactions: participant and coordinator ----

  reserveCommitTime(id: TransactionId): Promise<{ reservedTime: ClusterTimestamp }> {
    return this.http.call('POST', '/internal/transactions/reserveCommitTime', id);
  }

  prepareTransaction(command: PrepareTransaction): Promise<PrepareVote> {
    return this.http.call('POST', '/internal/transactions/prepare', command);
  }

  commitTransaction(command: CommitTransaction): Promise<{ committed: true }> {
    return this.http.call('POST', '/internal/transactions/commit', command);
  }

  abortTransaction(command: AbortTransaction): Promise<{ aborted: true }> {
    return this.http.call('POST', '/internal/transactions/abort', command);
  }

  coordinateCommitTransaction(command: CoordinateCommit): Promise<TransactionDecision> {
    return this.http.call('POST', '/internal/transactions/coordinateCommit', command);
  }

  resolveTransaction(id: TransactionId): Promise<ResolveOutcome> {
    return this.http.call('POST', '/internal/transactions/resolve', id);
  }

  transactionDecision(id: TransactionId): Promise<DecisionAnswer> {
    return this.http.call('POST', '/internal/transactions/decision', id);
  }

  /** The transactions this shard takes part in or coordinates now. */
  transactions(): Promise<ShardTransactions> {
    return this.http.call('GET', '/internal/transactions');
  }
}
