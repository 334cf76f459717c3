import { InternalHttpClient, type InternalClientOptions } from './internal-http-client.js';
import type {
  DataSizeRequest,
  DataSizeResult,
  StatsForBalancingRequest,
  StatsForBalancingResult,
  DonorMoveRangeRequest,
  MigrateCloneRequest,
  MoveRangeResult,
  RecvChunkPacingRequest,
  RecvChunkReleaseRequest,
  RecvChunkStartRequest,
  RecvChunkStatus,
  SessionHistoryBatch,
  SessionHistoryRequest,
  ShardMigrationStatus,
  SplitVectorRequest,
  SplitVectorResult,
  TransferModsRequest,
} from './migration-messages.js';

/**
 * A shard's chunk routes: what the config server asks a donor, what donor and recipient ask each
 * other, and the sizing commands splits and the balancer need.
 */
export class MigrationClient {
  private readonly http: InternalHttpClient;

  constructor(baseUrl: string, options: InternalClientOptions) {
    this.http = new InternalHttpClient(baseUrl, options);
  }

  get url(): string {
    return this.http.baseUrl;
  }

  /** Config server → donor: runs the migration to its end (or joins the same one running). */
  moveRange(request: DonorMoveRangeRequest): Promise<MoveRangeResult> {
    return this.http.call('POST', '/internal/migration/moveRange', request);
  }

  status(): Promise<ShardMigrationStatus> {
    return this.http.call('GET', '/internal/migration/status');
  }

  recvChunkStart(request: RecvChunkStartRequest): Promise<RecvChunkStatus> {
    return this.http.call('POST', '/internal/migration/recvChunkStart', request);
  }

  recvChunkStatus(migrationId: string): Promise<RecvChunkStatus> {
    return this.http.call('POST', '/internal/migration/recvChunkStatus', { migrationId });
  }

  recvChunkCommit(migrationId: string): Promise<RecvChunkStatus> {
    return this.http.call('POST', '/internal/migration/recvChunkCommit', { migrationId });
  }

  /** Answers whether the recipient is receiving that migration (and took the pacing). */
  recvChunkPacing(request: RecvChunkPacingRequest): Promise<{ applied: boolean }> {
    return this.http.call('POST', '/internal/migration/recvChunkPacing', request);
  }

  recvChunkRelease(request: RecvChunkReleaseRequest): Promise<{ released: boolean }> {
    return this.http.call('POST', '/internal/migration/recvChunkRelease', request);
  }

  /** Recipient → donor: a batch of documents as transfer lines (see `parseTransferLines`). */
  migrateClone(request: MigrateCloneRequest): Promise<string> {
    return this.http.callText('POST', '/internal/migration/migrateClone', request);
  }

  /** Recipient → donor: documents written in the range since the last call, as transfer lines. */
  transferMods(request: TransferModsRequest): Promise<string> {
    return this.http.callText('POST', '/internal/migration/transferMods', request);
  }

  /** Recipient → donor: the retry history of the range's documents, a page of sessions. */
  sessionHistory(request: SessionHistoryRequest): Promise<SessionHistoryBatch> {
    return this.http.call('POST', '/internal/migration/sessionHistory', request);
  }

  dataSize(request: DataSizeRequest): Promise<DataSizeResult> {
    return this.http.call('POST', '/internal/chunks/dataSize', request);
  }

  /** Owned bytes per collection, orphans left out: what the balancer weighs shards by. */
  statsForBalancing(request: StatsForBalancingRequest): Promise<StatsForBalancingResult> {
    return this.http.call('POST', '/internal/chunks/statsForBalancing', request);
  }

  splitVector(request: SplitVectorRequest): Promise<SplitVectorResult> {
    return this.http.call('POST', '/internal/chunks/splitVector', request);
  }
}
