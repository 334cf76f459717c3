import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { freePort } from '../tools/cluster/local-cluster.js';
import { startEmbeddedPostgres } from '../tools/cluster/postgres.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** A Postgres URL allowed to create databases; each test file makes its own. */
    pgAdminUrl: string;
  }
}

/**
 * One real PostgreSQL server for the whole run (embedded, fsync off): tests that need a
 * database create their own on it, so files stay independent without paying initdb each.
 * Set TESSERA_TEST_PG_URL to use a server you run instead.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const external = process.env.TESSERA_TEST_PG_URL;
  if (external !== undefined && external !== '') {
    project.provide('pgAdminUrl', external);
    return async () => undefined;
  }
  const dir = mkdtempSync(join(tmpdir(), 'tessera-test-pg-'));
  chmodSync(dir, 0o755);
  const server = await startEmbeddedPostgres({ dataDir: join(dir, 'data'), port: await freePort(), unsafeFast: true });
  project.provide('pgAdminUrl', server.urlFor('postgres'));
  return async () => {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  };
}
