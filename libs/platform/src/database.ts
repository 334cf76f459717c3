import { type DynamicModule, Injectable, Module, type OnModuleInit } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource, type MigrationInterface } from 'typeorm';
import { HealthService } from './health.js';
import { type TimeLimit, remainingTimeMs, timeLimitExpired } from './time-limit.js';

type MigrationClass = new () => MigrationInterface;
// TypeORM takes entity classes of any constructor shape.
// eslint-disable-next-line @typescript-eslint/no-unsafe-function-type
type EntityClass = Function;

export interface DatabaseOptions {
  url: string;
  poolSize: number;
  entities: EntityClass[];
}

/** Any key works as long as every node role uses the same one for its migration lock. */
const MIGRATION_LOCK_KEY = 0x7e55e7a;

/**
 * Runs a role's migrations under a Postgres advisory lock, so that several processes sharing
 * one database (several config servers) start safely: one migrates, the others wait and then
 * find nothing to do. Returns the names of the migrations applied.
 */
export async function runMigrations(url: string, migrations: MigrationClass[]): Promise<string[]> {
  const dataSource = new DataSource({ type: 'postgres', url, migrations, migrationsTransactionMode: 'each', logging: false });
  await dataSource.initialize();
  // A session lock must be taken and released on one connection, not on whichever the pool lends.
  const lockHolder = dataSource.createQueryRunner();
  try {
    await lockHolder.connect();
    await lockHolder.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    try {
      const applied = await dataSource.runMigrations({ transaction: 'each' });
      return applied.map((m) => m.name);
    } finally {
      await lockHolder.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
    }
  } finally {
    await lockHolder.release();
    await dataSource.destroy();
  }
}

@Injectable()
class DatabaseHealthCheck implements OnModuleInit {
  constructor(
    private readonly dataSource: DataSource,
    private readonly health: HealthService,
  ) {}

  onModuleInit(): void {
    this.health.register({
      name: 'database',
      check: async () => {
        await this.dataSource.query('SELECT 1');
      },
    });
  }
}

/** The node's own Postgres database through TypeORM; schema comes from migrations only. */
@Module({})
export class DatabaseModule {
  static forRoot(options: DatabaseOptions): DynamicModule {
    return {
      module: DatabaseModule,
      imports: [
        TypeOrmModule.forRoot({
          type: 'postgres',
          url: options.url,
          entities: options.entities,
          synchronize: false,
          migrationsRun: false,
          logging: false,
          extra: { max: options.poolSize },
          retryAttempts: 2,
          retryDelay: 1_000,
        }),
      ],
      providers: [DatabaseHealthCheck],
    };
  }
}

/** Anything that runs SQL the TypeORM way: a DataSource, an EntityManager or a QueryRunner. */
export interface Queryable {
  query(sql: string, parameters?: unknown[]): Promise<unknown>;
}

/**
 * The rows a statement returns. TypeORM answers `[rows, rowCount]` for UPDATE and DELETE (with
 * or without RETURNING) but plain rows for everything else; this gives rows for all of them.
 */
export async function queryRows<T>(db: Queryable, sql: string, parameters: unknown[] = []): Promise<T[]> {
  const result = await db.query(sql, parameters);
  if (/^\s*(UPDATE|DELETE)\b/i.test(sql)) return (result as [T[], number])[0];
  return result as T[];
}

/**
 * Runs one statement outside any transaction on the pool underneath TypeORM, and answers its
 * rows. For the data path's hottest statements (a shard's insert and find): `DataSource.query`
 * creates, connects and releases a QueryRunner around every statement, work that showed in a
 * shard's CPU per single-document insert command (docs/benchmarks.md). A
 * failure is the driver's own error, with the SQLSTATE in `code` (TypeORM would wrap it in a
 * QueryFailedError, with the driver's error in `driverError`).
 */
export async function poolQuery<T>(dataSource: DataSource, sql: string, parameters: unknown[], limit?: TimeLimit): Promise<T[]> {
  return (await poolStatement<T>(dataSource, { text: sql, values: parameters }, limit)).rows;
}

/** `poolQuery` as a `Queryable`, for code written against a transaction's manager that also runs outside one. */
export function poolQueryable(dataSource: DataSource, limit?: TimeLimit): Queryable {
  return { query: (sql, parameters = []) => poolQuery(dataSource, sql, parameters, limit) };
}

/**
 * `poolQuery` for a statement that may be named, answering the rows and how many rows it
 * inserted, updated or deleted. A named statement is parsed and planned once per connection and
 * then only bound and executed: give the same name only to the same text. Under a `limit`
 * (maxTimeMS) Postgres cancels the statement when the time runs out (`timedStatement`).
 */
export async function poolStatement<T>(
  dataSource: DataSource,
  statement: { name?: string; text: string; values: unknown[] },
  limit?: TimeLimit,
): Promise<{ rows: T[]; rowCount: number }> {
  const pool = (dataSource.driver as unknown as { master: Pool<T> }).master;
  const timeoutMs = remainingTimeMs(limit);
  if (timeoutMs !== undefined) return timedStatement(pool, statement, timeoutMs, limit!.maxTimeMS);
  const result = await pool.query(statement);
  return { rows: result.rows, rowCount: result.rowCount ?? 0 };
}

interface QueryResult<T> {
  rows: T[];
  rowCount: number | null;
}
interface Pool<T> {
  query(statement: object): Promise<QueryResult<T>>;
  connect(): Promise<{ query(statement: object | string): Promise<QueryResult<T>>; release(destroy?: boolean): void }>;
}

/**
 * A statement of an operation under `maxTimeMS`: Postgres cancels it when the time left
 * (`timeoutMs`) runs out (`statement_timeout`, set for its own transaction only), so a shard
 * stops the work, not only the router the waiting. A cancelled statement is `MAX_TIME_MS_EXPIRED`.
 */
async function timedStatement<T>(
  pool: Pool<T>,
  statement: { name?: string; text: string; values: unknown[] },
  timeoutMs: number,
  maxTimeMS: number,
): Promise<{ rows: T[]; rowCount: number }> {
  const client = await pool.connect();
  let broken = false;
  try {
    await client.query('BEGIN');
    await client.query(`SET LOCAL statement_timeout = ${Math.max(1, Math.ceil(timeoutMs))}`);
    const result = await client.query(statement);
    await client.query('COMMIT');
    return { rows: result.rows, rowCount: result.rowCount ?? 0 };
  } catch (error) {
    await client.query('ROLLBACK').catch(() => (broken = true));
    if (databaseErrorCode(error) === QUERY_CANCELED) throw timeLimitExpired(maxTimeMS);
    throw error;
  } finally {
    client.release(broken);
  }
}

/** SQLSTATE of a statement cancelled by `statement_timeout`. */
const QUERY_CANCELED = '57014';

/**
 * The code of a database failure: the SQLSTATE (or a Node socket error code) of the driver's
 * error, thrown as it is (`poolQuery`, a pg client) or wrapped by TypeORM in a QueryFailedError
 * (`driverError`). Undefined for anything else.
 */
export function databaseErrorCode(error: unknown): string | undefined {
  const driverError = (error as { driverError?: unknown } | null)?.driverError ?? error;
  const code = (driverError as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** SQLSTATE classes of failures that another attempt may not meet: connection, transaction rollback (deadlock, serialization), resources, operator intervention. */
const TRANSIENT_SQLSTATE = /^(08|40|53|57P)/;
const TRANSIENT_NODE_ERRORS = new Set(['ECONNRESET', 'ECONNREFUSED', 'ETIMEDOUT', 'EPIPE']);

/**
 * True for a database failure that says nothing about the statement itself (a dropped
 * connection, a deadlock victim, a server shutting down), so the same work may succeed if tried
 * again. False for everything else, bugs included.
 */
export function isTransientDatabaseError(error: unknown): boolean {
  const code = databaseErrorCode(error);
  if (code === undefined) return false;
  return TRANSIENT_SQLSTATE.test(code) || TRANSIENT_NODE_ERRORS.has(code);
}
