import { Inject, Injectable } from '@nestjs/common';
import { DataSource, type EntityManager } from 'typeorm';
import { TesseraError } from '@tessera/core';
import { SETTINGS } from '@tessera/platform';
import type { ShardSettings } from '../shard.settings.js';

/** The migration a shard takes part in, as `migration_registry` holds it. */
export interface RegisteredMigration {
  migrationId: string;
  role: 'donor' | 'recipient';
  ns: string;
  minEjson: string;
  maxEjson: string;
  otherShard: string;
}

/** A registered migration with when it was registered. */
export type ActiveMigration = RegisteredMigration & { since: string };

/**
 * MongoDB's ActiveMigrationsRegistry, persisted in `migration_registry`, with one rule loosened:
 * a shard receives one migration at a time and then takes part in no other, and donates up to
 * `TESSERA_MIGRATION_MAX_DONATIONS` at once (MongoDB: one), each of its own range to its own
 * recipient, never while it receives. Registrations run one at a time (the table is locked
 * until the caller's transaction ends), so the rules hold across concurrent requests and, being
 * persisted, across restarts. Registering a migration that is already registered (the same id
 * and role) is a no-op; any other that breaks a rule is refused with `CONFLICTING_OPERATION`,
 * naming a migration under way. Methods that take a manager run in the caller's transaction.
 */
@Injectable()
export class MigrationRegistryStore {
  constructor(
    private readonly dataSource: DataSource,
    @Inject(SETTINGS) private readonly settings: ShardSettings,
  ) {}

  async register(manager: EntityManager, migration: RegisteredMigration): Promise<void> {
    // SHARE ROW EXCLUSIVE conflicts with itself: a second registration waits for this transaction.
    await manager.query('LOCK TABLE migration_registry IN SHARE ROW EXCLUSIVE MODE');
    const active = await this.registered(manager);
    if (active.some((a) => a.migrationId === migration.migrationId && a.role === migration.role)) return;
    const conflict = this.conflictOf(active, migration);
    if (conflict !== undefined) {
      throw new TesseraError('CONFLICTING_OPERATION', `${describeActive(conflict.with)}; ${conflict.rule}`, {
        details: { active: conflict.with },
      });
    }
    await manager.query(
      `INSERT INTO migration_registry (migration_id, role, ns, min_ejson, max_ejson, other_shard) VALUES ($1, $2, $3, $4, $5, $6)`,
      [migration.migrationId, migration.role, migration.ns, migration.minEjson, migration.maxEjson, migration.otherShard],
    );
  }

  async unregister(manager: EntityManager, migrationId: string): Promise<void> {
    await manager.query('DELETE FROM migration_registry WHERE migration_id = $1', [migrationId]);
  }

  /** Every migration this shard takes part in, oldest first. */
  async registered(manager: EntityManager = this.dataSource.manager): Promise<ActiveMigration[]> {
    const rows: Array<{
      migration_id: string;
      role: 'donor' | 'recipient';
      ns: string;
      min_ejson: string;
      max_ejson: string;
      other_shard: string;
      registered_at: Date;
    }> = await manager.query('SELECT * FROM migration_registry ORDER BY registered_at, migration_id');
    return rows.map((row) => ({
      migrationId: row.migration_id,
      role: row.role,
      ns: row.ns,
      minEjson: row.min_ejson,
      maxEjson: row.max_ejson,
      otherShard: row.other_shard,
      since: row.registered_at.toISOString(),
    }));
  }

  /** Drops the donor registrations left by a crash before their coordinator documents were written. */
  async unregisterStrayDonors(): Promise<void> {
    await this.dataSource.query(
      `DELETE FROM migration_registry r WHERE r.role = 'donor'
       AND NOT EXISTS (SELECT 1 FROM migration_coordinators c WHERE c.id = r.migration_id)`,
    );
  }

  /** The first registered migration `migration` may not run beside, and the rule it breaks. */
  private conflictOf(
    active: readonly ActiveMigration[],
    migration: RegisteredMigration,
  ): { with: ActiveMigration; rule: string } | undefined {
    const receiving = active.find((a) => a.role === 'recipient');
    if (receiving !== undefined) return { with: receiving, rule: 'a shard that receives a migration takes part in no other' };
    const first = active[0];
    if (migration.role === 'recipient')
      return first && { with: first, rule: 'a shard that takes part in a migration receives none at the same time' };
    const sameRange = active.find((a) => a.ns === migration.ns && a.minEjson === migration.minEjson);
    if (sameRange !== undefined) return { with: sameRange, rule: 'a range is in one migration at a time' };
    const sameRecipient = active.find((a) => a.otherShard === migration.otherShard);
    if (sameRecipient !== undefined) return { with: sameRecipient, rule: 'a recipient receives one migration at a time' };
    const max = this.settings.TESSERA_MIGRATION_MAX_DONATIONS;
    if (active.length >= max)
      return { with: first!, rule: `a shard donates at most ${max} migration(s) at once (TESSERA_MIGRATION_MAX_DONATIONS)` };
    return undefined;
  }
}

function describeActive(a: ActiveMigration): string {
  return `this shard is already the ${a.role} of a migration of ${a.ns} ${a.minEjson} → ${a.maxEjson} ${a.role === 'donor' ? 'to' : 'from'} ${a.otherShard}`;
}
