import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { MigrationDecision } from '@tessera/protocol';
import { MigrationRegistryStore, type RegisteredMigration } from './migration-registry.store.js';
import { type RangeDeletionTask, RangeDeletionStore } from './range-deletion.store.js';

/** A donation's coordinator document (MongoDB's MigrationCoordinatorDocument), as recovery needs it. */
export interface CoordinatorDocument {
  id: string;
  ns: string;
  collectionUuid: string;
  recipient: string;
  recipientUrl: string;
  /** Undefined until the donor knows the config server's decision. */
  decision: MigrationDecision | undefined;
}

interface CoordinatorRow {
  id: string;
  ns: string;
  collection_uuid: string;
  recipient: string;
  recipient_url: string;
  decision: MigrationDecision | null;
}

/** What a donation persists when it starts. */
export interface CoordinatorStart {
  registration: RegisteredMigration;
  collectionUuid: string;
  min: Buffer;
  max: Buffer;
  recipientUrl: string;
  preMigrationVersion: unknown;
}

/**
 * `migration_coordinators`: one document per donation, from its registration until both sides
 * know the decision. The donor's registration and pending range deletion start and end with it,
 * in the same transactions, so a crash never leaves one without the other.
 */
@Injectable()
export class MigrationCoordinatorStore {
  constructor(
    private readonly dataSource: DataSource,
    private readonly registry: MigrationRegistryStore,
    private readonly rangeDeletions: RangeDeletionStore,
  ) {}

  /** Registers the donation, writes its coordinator document and its pending range deletion, together. */
  async create(start: CoordinatorStart): Promise<CoordinatorDocument> {
    const { registration: r } = start;
    await this.dataSource.transaction(async (manager) => {
      await this.registry.register(manager, r);
      await manager.query(
        `INSERT INTO migration_coordinators (id, ns, collection_uuid, min, max, min_ejson, max_ejson, recipient, recipient_url, pre_migration_version)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
        [
          r.migrationId,
          r.ns,
          start.collectionUuid,
          start.min,
          start.max,
          r.minEjson,
          r.maxEjson,
          r.otherShard,
          start.recipientUrl,
          JSON.stringify(start.preMigrationVersion),
        ],
      );
      const task: RangeDeletionTask = {
        id: r.migrationId,
        ns: r.ns,
        collectionUuid: start.collectionUuid,
        min: start.min,
        max: start.max,
        minEjson: r.minEjson,
        maxEjson: r.maxEjson,
      };
      await this.rangeDeletions.recordPending(task, manager);
    });
    return (await this.get(r.migrationId))!;
  }

  async get(id: string): Promise<CoordinatorDocument | undefined> {
    const rows: CoordinatorRow[] = await this.dataSource.query('SELECT * FROM migration_coordinators WHERE id = $1', [id]);
    return rows[0] && documentOf(rows[0]);
  }

  /** Every coordinator document, oldest first: what recovery finishes. */
  async all(): Promise<CoordinatorDocument[]> {
    const rows: CoordinatorRow[] = await this.dataSource.query('SELECT * FROM migration_coordinators ORDER BY created_at');
    return rows.map(documentOf);
  }

  async recordDecision(id: string, decision: MigrationDecision): Promise<void> {
    await this.dataSource.query('UPDATE migration_coordinators SET decision = $2 WHERE id = $1', [id, decision]);
  }

  /** Committed: the donor's range deletion becomes ready after `delaySecs`; the document and registration go. */
  async completeCommitted(id: string, delaySecs: number): Promise<void> {
    await this.dataSource.transaction(async (manager) => {
      await this.rangeDeletions.markReady(manager, id, delaySecs);
      await manager.query('DELETE FROM migration_coordinators WHERE id = $1', [id]);
      await this.registry.unregister(manager, id);
    });
  }

  /** Aborted, first step: the donor keeps the range, so its range deletion goes. */
  async forgetRangeDeletion(id: string): Promise<void> {
    await this.dataSource.transaction((manager) => this.rangeDeletions.remove(id, manager));
  }

  /** Aborted, last step (after the recipient was released): the document and registration go. */
  async completeAborted(id: string): Promise<void> {
    await this.dataSource.transaction(async (manager) => {
      await manager.query('DELETE FROM migration_coordinators WHERE id = $1', [id]);
      await this.registry.unregister(manager, id);
    });
  }
}

function documentOf(row: CoordinatorRow): CoordinatorDocument {
  return {
    id: row.id,
    ns: row.ns,
    collectionUuid: row.collection_uuid,
    recipient: row.recipient,
    recipientUrl: row.recipient_url,
    decision: row.decision ?? undefined,
  };
}
