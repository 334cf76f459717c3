import { Injectable, type OnModuleInit } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';

/**
 * The cluster id (MongoDB's config.version clusterId): made once, when the config database is
 * first used, and given to every shard and router that joins.
 */
@Injectable()
export class ClusterIdentityService implements OnModuleInit {
  private id: string | undefined;

  constructor(private readonly dataSource: DataSource) {}

  async onModuleInit(): Promise<void> {
    await this.dataSource.query('INSERT INTO version (cluster_id) VALUES ($1) ON CONFLICT DO NOTHING', [randomUUID()]);
    const rows: Array<{ cluster_id: string }> = await this.dataSource.query('SELECT cluster_id FROM version');
    this.id = rows[0]?.cluster_id;
  }

  get clusterId(): string {
    if (this.id === undefined) throw new Error('cluster identity read before module init');
    return this.id;
  }
}
