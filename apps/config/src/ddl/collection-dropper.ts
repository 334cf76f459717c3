import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { InternalClients, queryRows } from '@tessera/platform';
import { ChangelogService } from '../changelog/changelog.service.js';
import { ConfigClockService } from '../clock/config-clock.service.js';
import { MigrationRecordsService } from '../migration/migration-records.service.js';
import type { FencedTransaction } from './ddl-coordinator.js';

/**
 * Drops one collection for dropCollection and dropDatabase. A sharded one: migrations are stopped
 * first (`allow_migrations` off, and those in flight waited for), the collection's table is dropped on every shard, then the catalog
 * forgets it (chunks go with it) in one transaction. Each step is idempotent, so a resumed
 * coordinator can repeat it. A new collection of that name later gets a new uuid and epoch. An
 * unsharded one is dropped on every shard that stores it.
 */
@Injectable()
export class CollectionDropper {
  constructor(
    private readonly dataSource: DataSource,
    private readonly clock: ConfigClockService,
    private readonly changelog: ChangelogService,
    private readonly clients: InternalClients,
    private readonly migrationRecords: MigrationRecordsService,
  ) {}

  /** Returns whether the collection existed. The caller holds the database and collection locks. */
  async dropCollectionLocked(ns: string, inFencedTransaction: FencedTransaction): Promise<boolean> {
    const rows: Array<{ uuid: string }> = await this.dataSource.query('SELECT uuid FROM collections WHERE ns = $1', [ns]);
    const uuid = rows[0]?.uuid;
    if (uuid === undefined) return this.dropUnsharded(ns, inFencedTransaction);
    await this.migrationRecords.stopMigrations(uuid, inFencedTransaction);
    const shards: Array<{ url: string }> = await this.dataSource.query('SELECT url FROM shards');
    await Promise.all(shards.map((s) => this.clients.shard(s.url).dropCollection(uuid)));
    await inFencedTransaction(async (manager) => {
      const deleted: Array<{ ns: string }> = await queryRows(manager, 'DELETE FROM collections WHERE uuid = $1 RETURNING ns', [uuid]);
      if (deleted.length === 0) return;
      await manager.query('DELETE FROM tags WHERE ns = $1', [ns]);
      await this.clock.tick(manager);
      await this.changelog.record(manager, { what: 'dropCollection', ns, details: { uuid } });
    });
    return true;
  }

  /** An unsharded collection lives on its database's primary shard (or, after a movePrimary, wherever a copy was left): drop it everywhere. */
  private async dropUnsharded(ns: string, inFencedTransaction: FencedTransaction): Promise<boolean> {
    const shards: Array<{ url: string }> = await this.dataSource.query('SELECT url FROM shards');
    const results = await Promise.all(shards.map((s) => this.clients.shard(s.url).dropNamespace(ns)));
    const dropped = results.some((r) => r.dropped);
    if (dropped) {
      await inFencedTransaction(async (manager) => {
        await this.clock.tick(manager);
        await this.changelog.record(manager, { what: 'dropCollection', ns, details: { sharded: false } });
      });
    }
    return dropped;
  }
}
