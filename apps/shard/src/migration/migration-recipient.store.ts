import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { MigrationDecision } from '@tessera/protocol';
import { MigrationRegistryStore, type RegisteredMigration } from './migration-registry.store.js';
import { RangeDeletionStore } from './range-deletion.store.js';

/**
 * `migration_recipients`: a receipt per migration this shard receives, from `recvChunkStart`
 * until the donor tells it the decision, so a restarted recipient can still be released. Its
 * registration starts and ends with it.
 */
@Injectable()
export class MigrationRecipientStore {
  constructor(
    private readonly dataSource: DataSource,
    private readonly registry: MigrationRegistryStore,
    private readonly rangeDeletions: RangeDeletionStore,
  ) {}

  /** Registers the receipt and writes its document (again is a no-op). */
  async create(
    registration: RegisteredMigration,
    receipt: { collectionUuid: string; min: Buffer; max: Buffer; donorUrl: string },
  ): Promise<void> {
    await this.dataSource.transaction(async (manager) => {
      await this.registry.register(manager, registration);
      await manager.query(
        `INSERT INTO migration_recipients (id, ns, collection_uuid, min, max, donor, donor_url) VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (id) DO NOTHING`,
        [
          registration.migrationId,
          registration.ns,
          receipt.collectionUuid,
          receipt.min,
          receipt.max,
          registration.otherShard,
          receipt.donorUrl,
        ],
      );
    });
  }

  /** A registration without its receipt document is a crash between the two: dropped. */
  async dropRegistrationsWithoutReceipt(): Promise<void> {
    await this.dataSource.query(
      `DELETE FROM migration_registry WHERE role = 'recipient' AND migration_id NOT IN (SELECT id FROM migration_recipients)`,
    );
  }

  /** The namespace of the persisted receipt; undefined when there is none. */
  async nsOf(id: string): Promise<string | undefined> {
    const rows: Array<{ ns: string }> = await this.dataSource.query('SELECT ns FROM migration_recipients WHERE id = $1', [id]);
    return rows[0]?.ns;
  }

  /**
   * Ends the receipt by the decision, together with its registration: committed, this side's
   * range deletion is forgotten; aborted, it becomes ready at once.
   */
  async complete(id: string, decision: MigrationDecision): Promise<void> {
    await this.dataSource.transaction(async (manager) => {
      if (decision === 'committed') await this.rangeDeletions.remove(id, manager);
      else await this.rangeDeletions.markReady(manager, id, 0);
      await manager.query('DELETE FROM migration_recipients WHERE id = $1', [id]);
      await this.registry.unregister(manager, id);
    });
  }
}
