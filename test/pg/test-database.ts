import { DataSource } from 'typeorm';
import { inject } from 'vitest';
import { configMigrations, shardMigrations } from '@tessera/migrations';
import { runMigrations } from '@tessera/platform';
import { externalPostgres } from '../../tools/cluster/postgres.js';

export interface TestDatabase {
  url: string;
  dataSource: DataSource;
  /** Another connection pool to the same database, as a second process would have. */
  connect(): Promise<DataSource>;
  drop(): Promise<void>;
}

/**
 * A fresh database on the test run's Postgres with a role's migrations applied, for
 * `*.pg.spec.ts` files. Call `drop` in afterAll.
 */
export async function createTestDatabase(role: 'config' | 'shard', poolSize = 10): Promise<TestDatabase> {
  const server = externalPostgres(inject('pgAdminUrl'));
  const name = `pg_${role}_${Math.random().toString(36).slice(2, 10)}`;
  await server.ensureDatabase(name);
  const url = server.urlFor(name);
  await runMigrations(url, role === 'config' ? configMigrations : shardMigrations);
  const pools: DataSource[] = [];
  const connect = async () => {
    const dataSource = new DataSource({ type: 'postgres', url, extra: { max: poolSize }, logging: false });
    await dataSource.initialize();
    pools.push(dataSource);
    return dataSource;
  };
  const dataSource = await connect();
  return {
    url,
    dataSource,
    connect,
    drop: async () => {
      await Promise.all(pools.map((p) => p.destroy()));
      await server.dropDatabase(name);
    },
  };
}
