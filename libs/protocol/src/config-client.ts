import type { InternalClientOptions } from './internal-http-client.js';
import { InternalHttpClient } from './internal-http-client.js';
import type { AddShardRequest, ClusterInfo, RouterDescription, RouterPingRequest, ShardDescription } from './messages.js';

/** Typed client of the config server's internal API. */
export class ConfigClient {
  private readonly http: InternalHttpClient;

  constructor(baseUrl: string, options: InternalClientOptions) {
    this.http = new InternalHttpClient(baseUrl, options);
  }

  get url(): string {
    return this.http.baseUrl;
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
}
