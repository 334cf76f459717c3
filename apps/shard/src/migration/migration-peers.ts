import { Injectable } from '@nestjs/common';
import { TesseraError } from '@tessera/core';
import type { ConfigClient, MigrationClient } from '@tessera/protocol';
import { InternalClients } from '@tessera/platform';
import { ShardIdentityService } from '../identity/shard-identity.service.js';

/** Requests between donor and recipient can wait on a whole batch or a drain. */
export const PEER_TIMEOUT_MS = 120_000;

/** The nodes a migration talks to: this shard's name, the config server, the other shard. */
@Injectable()
export class MigrationPeers {
  constructor(
    private readonly identity: ShardIdentityService,
    private readonly clients: InternalClients,
  ) {}

  /** This shard's name; throws `ILLEGAL_OPERATION` before it has been added to a cluster. */
  async shardName(): Promise<string> {
    const shard = (await this.identity.get())?.shardName;
    if (shard === undefined) throw new TesseraError('ILLEGAL_OPERATION', 'this shard has not been added to a cluster yet');
    return shard;
  }

  async config(): Promise<ConfigClient> {
    const identity = await this.identity.get();
    if (identity === null) throw new TesseraError('ILLEGAL_OPERATION', 'this shard has not been added to a cluster yet');
    return this.clients.config(identity.configUrl);
  }

  /** The other shard of a migration (donor or recipient). */
  shard(url: string): MigrationClient {
    return this.clients.migration(url, PEER_TIMEOUT_MS);
  }
}
