import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { TesseraError } from '@tessera/core';
import { type TestDatabase, createTestDatabase } from '../../../../test/pg/test-database.js';
import type { ShardSettings } from '../shard.settings.js';
import { MigrationRegistryStore, type RegisteredMigration } from './migration-registry.store.js';

let db: TestDatabase;
let registry: MigrationRegistryStore;

beforeAll(async () => {
  db = await createTestDatabase('shard');
  registry = new MigrationRegistryStore(db.dataSource, { TESSERA_MIGRATION_MAX_DONATIONS: 3 } as ShardSettings);
});
afterAll(async () => db?.drop());
afterEach(async () => db.dataSource.query('DELETE FROM migration_registry'));

const donation = (min: number, to: string, ns = 'db.c'): RegisteredMigration => ({
  migrationId: randomUUID(),
  role: 'donor',
  ns,
  minEjson: JSON.stringify({ x: min }),
  maxEjson: JSON.stringify({ x: min + 10 }),
  otherShard: to,
});
const receipt = (min: number): RegisteredMigration => ({ ...donation(min, 'shard9'), role: 'recipient' });

const register = (m: RegisteredMigration) => db.dataSource.transaction((manager) => registry.register(manager, m));

async function refusal(m: RegisteredMigration): Promise<string> {
  const error = await register(m).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(TesseraError);
  expect((error as TesseraError).code).toBe('CONFLICTING_OPERATION');
  return (error as TesseraError).message;
}

describe('the migration registry', () => {
  it('lets a donor serve several ranges, each to its own recipient, up to its limit', async () => {
    const donations = [donation(0, 'shard1'), donation(10, 'shard2'), donation(20, 'shard3')];
    for (const d of donations) await register(d);
    expect((await registry.registered()).map((r) => r.migrationId)).toEqual(donations.map((d) => d.migrationId));
    expect(await refusal(donation(30, 'shard4'))).toMatch(/donates at most 3 migration\(s\) at once/);
    // The same registration again is a no-op.
    await register(donations[1]!);
    expect(await registry.registered()).toHaveLength(3);
  });

  it('refuses a second migration of a range, or a second one to the same recipient', async () => {
    await register(donation(0, 'shard1'));
    expect(await refusal(donation(0, 'shard2'))).toMatch(/a range is in one migration at a time/);
    expect(await refusal(donation(10, 'shard1'))).toMatch(/a recipient receives one migration at a time/);
  });

  it('never lets a shard donate and receive at once, nor receive two', async () => {
    await register(donation(0, 'shard1'));
    expect(await refusal(receipt(50))).toMatch(/receives none at the same time/);
    await db.dataSource.query('DELETE FROM migration_registry');
    await register(receipt(50));
    expect(await refusal(donation(0, 'shard1'))).toMatch(/receives a migration takes part in no other/);
    expect(await refusal(receipt(60))).toMatch(/receives a migration takes part in no other/);
  });

  it('keeps its rules across concurrent registrations', async () => {
    // Ten donations to ten recipients at once: the limit holds, as the lock serializes them.
    const outcomes = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => register(donation(i * 10, `shard${i + 1}`))));
    expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(3);
    expect(await registry.registered()).toHaveLength(3);
  });

  it('drops donor registrations that have no coordinator document', async () => {
    const stray = donation(0, 'shard1');
    await register(stray);
    await registry.unregisterStrayDonors();
    expect(await registry.registered()).toEqual([]);
  });
});
