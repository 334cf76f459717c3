import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { TesseraError } from '@tessera/core';
import { type ShardIdentity, shardIdentitySchema } from '@tessera/protocol';
import { parseWith } from '@tessera/platform';

interface IdentityRow {
  cluster_id: string;
  shard_name: string;
  config_url: string;
}

/**
 * This shard's membership (MongoDB's shardIdentity document). The first config server to add
 * the shard sets it; a config server of another cluster, or the same cluster under another
 * name, is refused, so one shard can never serve two clusters.
 */
@Injectable()
export class ShardIdentityService {
  constructor(private readonly dataSource: DataSource) {}

  async get(): Promise<ShardIdentity | null> {
    const rows: IdentityRow[] = await this.dataSource.query('SELECT cluster_id, shard_name, config_url FROM shard_identity');
    const row = rows[0];
    return row === undefined ? null : { clusterId: row.cluster_id, shardName: row.shard_name, configUrl: row.config_url };
  }

  async set(input: ShardIdentity): Promise<ShardIdentity> {
    const wanted = parseWith(shardIdentitySchema, input, 'shard identity');
    return this.dataSource.transaction(async (manager) => {
      const rows: IdentityRow[] = await manager.query('SELECT cluster_id, shard_name FROM shard_identity FOR UPDATE');
      const current = rows[0];
      if (current !== undefined && (current.cluster_id !== wanted.clusterId || current.shard_name !== wanted.shardName)) {
        throw new TesseraError(
          'ILLEGAL_OPERATION',
          `this shard already belongs to cluster ${current.cluster_id} as shard "${current.shard_name}"`,
          { details: { clusterId: current.cluster_id, shardName: current.shard_name } },
        );
      }
      await manager.query(
        `INSERT INTO shard_identity (cluster_id, shard_name, config_url) VALUES ($1, $2, $3)
         ON CONFLICT (singleton) DO UPDATE SET config_url = EXCLUDED.config_url, updated_at = now()`,
        [wanted.clusterId, wanted.shardName, wanted.configUrl],
      );
      return wanted;
    });
  }
}
