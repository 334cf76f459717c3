import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { type ClusterInfo, type RouterDescription, type RouterPingRequest, routerPingRequestSchema } from '@tessera/protocol';
import { parseWith } from '@tessera/platform';
import { ClusterIdentityService } from '../cluster-identity.service.js';

interface MongosRow {
  id: string;
  url: string;
  version: string;
  started_at: Date;
  last_ping_at: Date;
}

/** Routers register and ping (MongoDB's config.mongos); the config server answers the cluster id. */
@Injectable()
export class RouterRegistryService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly identity: ClusterIdentityService,
  ) {}

  async ping(input: RouterPingRequest): Promise<ClusterInfo> {
    const ping = parseWith(routerPingRequestSchema, input, 'router ping');
    await this.dataSource.query(
      `INSERT INTO mongos (id, url, version, started_at, last_ping_at) VALUES ($1, $2, $3, $4, now())
       ON CONFLICT (id) DO UPDATE SET url = EXCLUDED.url, version = EXCLUDED.version,
         started_at = EXCLUDED.started_at, last_ping_at = now()`,
      [ping.id, ping.url, ping.version, ping.startedAt],
    );
    return { clusterId: this.identity.clusterId };
  }

  async listRouters(): Promise<RouterDescription[]> {
    const rows: MongosRow[] = await this.dataSource.query('SELECT * FROM mongos ORDER BY id');
    return rows.map((r) => ({
      id: r.id,
      url: r.url,
      version: r.version,
      startedAt: r.started_at.toISOString(),
      lastPingAt: r.last_ping_at.toISOString(),
    }));
  }
}
