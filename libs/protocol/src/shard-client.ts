import type { InternalClientOptions } from './internal-http-client.js';
import { InternalHttpClient } from './internal-http-client.js';
import type { ShardIdentity, ShardIdentityResponse } from './messages.js';

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
}
