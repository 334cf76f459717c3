import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import { DataSource } from 'typeorm';
import { TesseraError } from '@tessera/core';
import { type AddShardRequest, type ShardDescription, addShardRequestSchema } from '@tessera/protocol';
import { InternalClients, LOGGER, SETTINGS, advertisedUrl, parseWith } from '@tessera/platform';
import { ChangelogService } from '../changelog/changelog.service.js';
import { ConfigClockService } from '../clock/config-clock.service.js';
import { ClusterIdentityService } from '../cluster-identity.service.js';
import type { ConfigSettings } from '../config.settings.js';
import { ShardEntity } from './shard.entity.js';
import { ShardMonitorService } from './shard-monitor.service.js';

/** Serialises addShard across config processes sharing one database. */
const ADD_SHARD_LOCK = 0x5a4dd;

/** The shard registry (MongoDB's config.shards): adding shards and listing them. */
@Injectable()
export class ShardRegistryService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly identity: ClusterIdentityService,
    private readonly monitor: ShardMonitorService,
    @Inject(SETTINGS) private readonly settings: ConfigSettings,
    @Inject(LOGGER) private readonly logger: Logger,
    private readonly clients: InternalClients,
    private readonly clock: ConfigClockService,
    private readonly changelog: ChangelogService,
  ) {}

  /**
   * Adds a shard: checks that it answers with our cluster key, that it is not a member of
   * another cluster, that neither name nor URL is taken, then records it and gives the shard
   * its identity. Adding the same name at the same URL again is a no-op that answers the shard.
   */
  async addShard(input: AddShardRequest): Promise<ShardDescription> {
    const { name, url } = parseWith(addShardRequestSchema, input, 'addShard request');
    const entity = await this.dataSource.transaction(async (manager) => {
      await manager.query('SELECT pg_advisory_xact_lock($1)', [ADD_SHARD_LOCK]);
      const byName = await manager.findOneBy(ShardEntity, { name });
      if (byName !== null) {
        if (byName.url === url) return byName;
        throw new TesseraError('ILLEGAL_OPERATION', `a shard named "${name}" already exists, at ${byName.url}`, { details: { name, url: byName.url } });
      }
      const byUrl = await manager.findOneBy(ShardEntity, { url });
      if (byUrl !== null) {
        throw new TesseraError('ILLEGAL_OPERATION', `${url} is already in the cluster as shard "${byUrl.name}"`, { details: { name: byUrl.name, url } });
      }
      await this.claimShard(name, url);
      const saved = await manager.save(manager.create(ShardEntity, { name, url, state: 'active', zones: [], addedAt: new Date() }));
      const time = await this.clock.tick(manager, { topology: true });
      await this.changelog.record(manager, { what: 'addShard', shard: name, details: { url, topologyTime: time.topologyTime } });
      return saved;
    });
    await this.monitor.check(entity);
    this.logger.info({ shard: name, url }, `shard ${name} at ${url} is in the cluster`);
    return this.describe(entity);
  }

  async listShards(): Promise<ShardDescription[]> {
    const shards = await this.dataSource.getRepository(ShardEntity).find({ order: { name: 'ASC' } });
    return shards.map((s) => this.describe(s));
  }

  private async claimShard(name: string, url: string): Promise<void> {
    const client = this.clients.shard(url, 5_000);
    try {
      await client.setIdentity({ clusterId: this.identity.clusterId, shardName: name, configUrl: advertisedUrl(this.settings) });
    } catch (error) {
      if (!(error instanceof TesseraError)) throw error;
      switch (error.code) {
        case 'HOST_UNREACHABLE':
        case 'NETWORK_TIMEOUT':
          throw new TesseraError(error.code, `cannot add shard "${name}": ${url} does not answer (${error.message})`, { details: { name, url } });
        case 'UNAUTHORIZED':
          throw new TesseraError('ILLEGAL_OPERATION', `cannot add shard "${name}": ${url} refused this cluster's key, so it is configured for another cluster`, {
            details: { name, url },
          });
        default:
          throw error;
      }
    }
  }

  private describe(shard: ShardEntity): ShardDescription {
    const health = this.monitor.reachability(shard.name);
    return {
      name: shard.name,
      url: shard.url,
      state: shard.state,
      zones: shard.zones,
      addedAt: shard.addedAt.toISOString(),
      reachable: health.reachable,
      lastSeenAt: health.lastSeenAt?.toISOString() ?? null,
      lastError: health.lastError,
    };
  }
}
