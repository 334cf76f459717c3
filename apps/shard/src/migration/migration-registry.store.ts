import { Injectable } from '@nestjs/common';
import { DataSource, type EntityManager } from 'typeorm';
import { TesseraError } from '@tessera/core';

/** The migration a shard takes part in, as `migration_registry` holds it. */
export interface RegisteredMigration {
  migrationId: string;
  role: 'donor' | 'recipient';
  ns: string;
  minEjson: string;
  maxEjson: string;
  otherShard: string;
}

/**
 * MongoDB's ActiveMigrationsRegistry, persisted in `migration_registry`: a shard donates or
 * receives one migration at a time, across restarts. Registering a migration that is already
 * registered (the same id and role) is a no-op; any other is refused with
 * `CONFLICTING_OPERATION`, naming the one under way. Methods that take a manager run in the
 * caller's transaction.
 */
@Injectable()
export class MigrationRegistryStore {
  constructor(private readonly dataSource: DataSource) {}

  async register(manager: EntityManager, migration: RegisteredMigration): Promise<void> {
    const inserted: unknown[] = await manager.query(
      `INSERT INTO migration_registry (migration_id, role, ns, min_ejson, max_ejson, other_shard) VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (slot) DO NOTHING RETURNING slot`,
      [migration.migrationId, migration.role, migration.ns, migration.minEjson, migration.maxEjson, migration.otherShard],
    );
    if (inserted.length > 0) return;
    const active = await this.registered(manager);
    if (active?.migrationId === migration.migrationId && active.role === migration.role) return;
    throw new TesseraError(
      'CONFLICTING_OPERATION',
      active === undefined
        ? 'another migration is being registered on this shard'
        : `this shard is already the ${active.role} of a migration of ${active.ns} ${active.minEjson} → ${active.maxEjson} ${active.role === 'donor' ? 'to' : 'from'} ${active.otherShard}; a shard takes part in one migration at a time`,
      { details: { active } },
    );
  }

  async unregister(manager: EntityManager, migrationId: string): Promise<void> {
    await manager.query('DELETE FROM migration_registry WHERE migration_id = $1', [migrationId]);
  }

  async registered(manager: EntityManager = this.dataSource.manager): Promise<(RegisteredMigration & { since: string }) | undefined> {
    const rows: Array<{
      migration_id: string;
      role: 'donor' | 'recipient';
      ns: string;
      min_ejson: string;
      max_ejson: string;
      other_shard: string;
      registered_at: Date;
    }> = await manager.query('SELECT * FROM migration_registry');
    const row = rows[0];
    return (
      row && {
        migrationId: row.migration_id,
        role: row.role,
        ns: row.ns,
        minEjson: row.min_ejson,
        maxEjson: row.max_ejson,
        otherShard: row.other_shard,
        since: row.registered_at.toISOString(),
      }
    );
  }

  /** Drops a donor registration left by a crash before its coordinator document was written. */
  async unregisterStrayDonor(): Promise<void> {
    await this.dataSource.transaction(async (manager) => {
      const active = await this.registered(manager);
      if (active?.role === 'donor') await this.unregister(manager, active.migrationId);
    });
  }
}
