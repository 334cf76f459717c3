import { Inject, Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { DataSource } from 'typeorm';
import { TesseraError } from '@tessera/core';
import {
  type AddShardRequest,
  type RemoveShardRequest,
  type RemoveShardResult,
  type ShardDescription,
  type ShardState,
  addShardRequestSchema,
  removeShardRequestSchema,
} from '@tessera/protocol';
import { InternalClients, LOGGER, SETTINGS, advertisedUrl, parseWith } from '@tessera/platform';
import { ChangelogService } from '../changelog/changelog.service.js';
import { ConfigClockService } from '../clock/config-clock.service.js';
import { ClusterIdentityService } from '../cluster-identity.service.js';
import type { ConfigSettings } from '../config.settings.js';
import { DistLockService } from '../locks/dist-lock.service.js';
import { LeaderService } from '../leader/leader.service.js';
import { migrationsInvolving } from '../migration/active-migration.store.js';
import { ShardEntity } from './shard.entity.js';
import { ShardMonitorService } from './shard-monitor.service.js';

/** Serialises addShard across config processes sharing one database. */
const ADD_SHARD_LOCK = 0x5a4dd;
/** The distributed lock that serialises changes to the shard registry (MongoDB's config.shards mutex). */
export const SHARDS_RESOURCE = 'config.shards';

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
    private readonly leader: LeaderService,
    private readonly locks: DistLockService,
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
        throw new TesseraError('ILLEGAL_OPERATION', `a shard named "${name}" already exists, at ${byName.url}`, {
          details: { name, url: byName.url },
        });
      }
      const byUrl = await manager.findOneBy(ShardEntity, { url });
      if (byUrl !== null) {
        throw new TesseraError('ILLEGAL_OPERATION', `${url} is already in the cluster as shard "${byUrl.name}"`, {
          details: { name: byUrl.name, url },
        });
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

  /**
   * removeShard, as MongoDB's: the first call marks the shard draining (`started`); later calls
   * report what still holds it (`ongoing`: chunks, jumbo ones among them, databases whose
   * primary it is, which need movePrimary, and migrations in flight to or from it, each named in
   * `note`); once nothing is left the shard leaves the registry (`completed`) and TopologyTime
   * ticks. The last active shard cannot be removed.
   */
  async removeShard(input: RemoveShardRequest): Promise<RemoveShardResult> {
    const { name } = parseWith(removeShardRequestSchema, input, 'removeShard request');
    await this.leader.assertLeader();
    const operation = randomUUID();
    const lock = await this.locks.acquire(SHARDS_RESOURCE, operation, `removeShard ${name}`);
    try {
      return await this.dataSource.transaction(async (manager) => {
        const shards: Array<{ name: string; state: ShardState }> = await manager.query(
          'SELECT name, state FROM shards ORDER BY name FOR NO KEY UPDATE',
        );
        const shard = shards.find((s) => s.name === name);
        if (shard === undefined) throw new TesseraError('SHARD_NOT_FOUND', `no shard named "${name}"`, { details: { shard: name } });
        if (!shards.some((s) => s.name !== name && s.state === 'active')) {
          throw new TesseraError('ILLEGAL_OPERATION', `"${name}" is the last active shard; its data would have nowhere to go`, {
            details: { shard: name },
          });
        }
        const chunks: Array<{ n: string; jumbo: string }> = await manager.query(
          'SELECT count(*) AS n, count(*) FILTER (WHERE jumbo) AS jumbo FROM chunks WHERE shard = $1',
          [name],
        );
        const dbs: Array<{ name: string }> = await manager.query('SELECT name FROM databases WHERE primary_shard = $1 ORDER BY name', [
          name,
        ]);
        const migrations = await migrationsInvolving(manager, name);
        const remaining = {
          chunks: Number(chunks[0]!.n),
          jumboChunks: Number(chunks[0]!.jumbo),
          databases: dbs.length,
          migrations: migrations.length,
        };
        const dbsToMove = dbs.map((d) => d.name);
        const answer = { shard: name, remaining, dbsToMove, migrationIds: migrations.map((m) => m.id) };
        if (shard.state === 'active') {
          await manager.query("UPDATE shards SET state = 'draining' WHERE name = $1", [name]);
          await this.clock.tick(manager);
          await this.changelog.record(manager, { what: 'removeShard.start', shard: name, details: remaining });
          return { state: 'started', ...answer, note: drainNote(name, remaining, dbsToMove, migrations) };
        }
        // The shard's row goes only when nothing refers to it: migrations in flight name it too.
        if (remaining.chunks > 0 || remaining.databases > 0 || remaining.migrations > 0) {
          return { state: 'ongoing', ...answer, note: drainNote(name, remaining, dbsToMove, migrations) };
        }
        await manager.query('DELETE FROM shards WHERE name = $1', [name]);
        await this.clock.tick(manager, { topology: true });
        await this.changelog.record(manager, { what: 'removeShard', shard: name });
        this.logger.info({ shard: name }, `shard ${name} has left the cluster`);
        return { state: 'completed', ...answer, note: `${name} has left the cluster` };
      });
    } finally {
      await lock.release();
    }
  }

  async listShards(): Promise<ShardDescription[]> {
    const shards = await this.dataSource.getRepository(ShardEntity).find({ order: { name: 'ASC' } });
    return shards.map((s) => this.describe(s));
  }

  private async claimShard(name: string, url: string): Promise<void> {
    const client = this.clients.shard(url, 5_000);
    try {
      await client.setIdentity({ clusterId: this.identity.clusterId, shardName: name, configUrl: this.settings.TESSERA_CONFIG_URLS ?? advertisedUrl(this.settings) });
    } catch (error) {
      if (!(error instanceof TesseraError)) throw error;
      switch (error.code) {
        case 'HOST_UNREACHABLE':
        case 'NETWORK_TIMEOUT':
          throw new TesseraError(error.code, `cannot add shard "${name}": ${url} does not answer (${error.message})`, {
            details: { name, url },
          });
        case 'UNAUTHORIZED':
          throw new TesseraError(
            'ILLEGAL_OPERATION',
            `cannot add shard "${name}": ${url} refused this cluster's key, so it is configured for another cluster`,
            {
              details: { name, url },
            },
          );
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

/** What still holds a draining shard, in words: removeShard's `note`. */
function drainNote(
  shard: string,
  remaining: { chunks: number; jumboChunks: number },
  dbsToMove: string[],
  migrations: Array<{ id: string; ns: string; donor: string; recipient: string }>,
): string {
  const holds: string[] = [];
  if (remaining.chunks > 0) {
    const jumbo =
      remaining.jumboChunks === 0
        ? ''
        : ` (${remaining.jumboChunks} jumbo: the balancer moves them only with attemptToBalanceJumboChunks; split them, or clear their jumbo flag)`;
    holds.push(`${remaining.chunks} chunk(s) still to move off ${shard}${jumbo}; the balancer moves them`);
  }
  if (dbsToMove.length > 0) holds.push(`movePrimary needed for ${dbsToMove.join(', ')}`);
  for (const m of migrations) holds.push(`migration ${m.id} of ${m.ns} (${m.donor} → ${m.recipient}) in flight`);
  return holds.length === 0 ? `nothing holds ${shard}; the next removeShard completes it` : holds.join('; ');
}
