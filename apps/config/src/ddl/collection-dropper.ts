import { Injectable } from '@nestjs/common';
import { ChangelogService } from '../changelog/changelog.service.js';
import { ConfigClockService } from '../clock/config-clock.service.js';
import { MigrationRecordsService } from '../migration/migration-records.service.js';
import { CollectionCatalogStore } from './collection-catalog.store.js';
import type { FencedTransaction } from './ddl-coordinator.js';
import { ShardDirectory } from './shard-directory.js';

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
    private readonly catalog: CollectionCatalogStore,
    private readonly shards: ShardDirectory,
    private readonly clock: ConfigClockService,
    private readonly changelog: ChangelogService,
    private readonly migrationRecords: MigrationRecordsService,
  ) {}

  /** Returns whether the collection existed. The caller holds the database and collection locks. */
  async dropCollectionLocked(ns: string, inFencedTransaction: FencedTransaction): Promise<boolean> {
    const uuid = (await this.catalog.find(ns))?.uuid;
    if (uuid === undefined) return this.dropUnsharded(ns, inFencedTransaction);
    await this.migrationRecords.stopMigrations(uuid, inFencedTransaction);
    const shards = await this.shards.all();
    await Promise.all(shards.map(({ client }) => client.dropCollection(uuid)));
    await inFencedTransaction(async (manager) => {
      if (!(await this.catalog.remove(manager, uuid, ns))) return;
      await this.clock.tick(manager);
      await this.changelog.record(manager, { what: 'dropCollection', ns, details: { uuid } });
    });
    return true;
  }

  /** An unsharded collection lives on its database's primary shard (or, after a movePrimary, wherever a copy was left): drop it everywhere. */
  private async dropUnsharded(ns: string, inFencedTransaction: FencedTransaction): Promise<boolean> {
    const shards = await this.shards.all();
    const results = await Promise.all(shards.map(({ client }) => client.dropNamespace(ns)));
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
