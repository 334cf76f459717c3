import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { TesseraError } from '@tessera/core';
import { InternalClients } from '@tessera/platform';
import type { ShardClient } from '@tessera/protocol';

/** A shard DDL sends a request to: its URL (for messages) and its client. */
export interface ShardTarget {
  url: string;
  client: ShardClient;
}

/**
 * The shards of the registry (`shards` table) as DDL addresses them: by name, read at the moment
 * of the call, so a shard that moved to another URL is reached where it is now.
 */
@Injectable()
export class ShardDirectory {
  constructor(
    private readonly dataSource: DataSource,
    private readonly clients: InternalClients,
  ) {}

  /** The client of the shard named `name`; `SHARD_NOT_FOUND` if there is none. */
  async shard(name: string): Promise<ShardClient> {
    const [target] = await this.targets([name]);
    if (target === undefined) throw new TesseraError('SHARD_NOT_FOUND', `no shard named "${name}"`, { details: { shard: name } });
    return target.client;
  }

  /** The shards named in `names` that exist, each once (in no particular order). */
  async targets(names: readonly string[]): Promise<ShardTarget[]> {
    const rows: Array<{ url: string }> = await this.dataSource.query('SELECT url FROM shards WHERE name = ANY($1)', [[...new Set(names)]]);
    return rows.map((r) => ({ url: r.url, client: this.clients.shard(r.url) }));
  }

  /** The names of the active shards (not draining), in name order. */
  async activeShardNames(): Promise<string[]> {
    const active: Array<{ name: string }> = await this.dataSource.query("SELECT name FROM shards WHERE state = 'active' ORDER BY name");
    return active.map((s) => s.name);
  }
}
