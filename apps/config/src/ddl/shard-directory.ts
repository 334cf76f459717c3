import { Injectable } from '@nestjs/common';
import { DataSource, type EntityManager } from 'typeorm';
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

  /** The collection shard `name` stores under `ns` (its uuid and document count), or undefined when it stores none. */
  async storedCollection(name: string, ns: string): Promise<{ uuid: string; documents: number } | undefined> {
    try {
      return await (await this.shard(name)).describeNamespace(ns);
    } catch (error) {
      if (error instanceof TesseraError && error.code === 'NAMESPACE_NOT_FOUND') return undefined;
      throw error;
    }
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

  /** Every shard of the registry, draining ones included. */
  async all(): Promise<ShardTarget[]> {
    const rows: Array<{ url: string }> = await this.dataSource.query('SELECT url FROM shards');
    return rows.map((r) => ({ url: r.url, client: this.clients.shard(r.url) }));
  }

  /** Every shard of the registry by name, draining ones included, in name order; their clients give up after `timeoutMs`. */
  async allNamed(timeoutMs: number): Promise<Array<ShardTarget & { name: string }>> {
    const rows: Array<{ name: string; url: string }> = await this.dataSource.query('SELECT name, url FROM shards ORDER BY name');
    return rows.map((r) => ({ name: r.name, url: r.url, client: this.clients.shard(r.url, timeoutMs) }));
  }

  /** The active shards, in name order, read inside `manager`'s transaction; their clients give up after `timeoutMs`. */
  async active(manager: EntityManager, timeoutMs: number): Promise<Array<ShardTarget & { name: string }>> {
    const rows: Array<{ name: string; url: string }> = await manager.query(
      "SELECT name, url FROM shards WHERE state = 'active' ORDER BY name",
    );
    return rows.map((r) => ({ name: r.name, url: r.url, client: this.clients.shard(r.url, timeoutMs) }));
  }

  /** `SHARD_NOT_FOUND` when there is no shard named `name`, `ILLEGAL_OPERATION` when it is draining. */
  async assertActive(name: string, manager: EntityManager = this.dataSource.manager): Promise<void> {
    const rows: Array<{ state: string }> = await manager.query('SELECT state FROM shards WHERE name = $1', [name]);
    if (rows[0] === undefined) throw new TesseraError('SHARD_NOT_FOUND', `no shard named "${name}"`, { details: { shard: name } });
    if (rows[0].state !== 'active')
      throw new TesseraError('ILLEGAL_OPERATION', `shard "${name}" is draining and cannot take new data`, { details: { shard: name } });
  }
}
