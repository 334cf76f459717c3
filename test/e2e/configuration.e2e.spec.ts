import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { distDir } from './test-cluster.js';

const KEY = 'k'.repeat(40);

/** Starts a node with only `env` (plus PATH) and returns how it ended. */
function boot(role: 'config' | 'shard' | 'router', env: Record<string, string>): { status: number | null; stderr: string; stdout: string } {
  const run = spawnSync(process.execPath, [join(distDir, 'apps', role, 'src', 'main.js')], {
    env: { PATH: process.env.PATH ?? '', ...env },
    encoding: 'utf8',
    timeout: 20_000,
  });
  return { status: run.status, stderr: run.stderr, stdout: run.stdout };
}

describe('a node with bad configuration', () => {
  it('refuses to start without a cluster key or a database, naming both settings, with exit code 78', () => {
    const { status, stderr } = boot('shard', {});
    expect(status).toBe(78);
    expect(stderr).toContain('tessera-shard: invalid configuration');
    expect(stderr).toContain('TESSERA_CLUSTER_KEY: is required');
    expect(stderr).toContain('TESSERA_DATABASE_URL: is required');
  });

  it('names a malformed port and a too-short key without printing the key', () => {
    const { status, stderr } = boot('config', {
      TESSERA_CLUSTER_KEY: 'short-secret',
      TESSERA_PORT: 'eighty',
      TESSERA_DATABASE_URL: 'mysql://nope',
    });
    expect(status).toBe(78);
    expect(stderr).toMatch(/TESSERA_PORT: .*got "eighty"/);
    expect(stderr).toMatch(/TESSERA_CLUSTER_KEY: must be at least 32 characters \(given \(hidden\)\)/);
    expect(stderr).toContain('TESSERA_DATABASE_URL: must be a postgres:// connection string');
    expect(stderr).not.toContain('short-secret');
  });

  it('requires a router to know its config server', () => {
    const { status, stderr } = boot('router', { TESSERA_CLUSTER_KEY: KEY, TESSERA_LOG_LEVEL: 'loud' });
    expect(status).toBe(78);
    expect(stderr).toContain('TESSERA_CONFIG_URL: is required');
    expect(stderr).toMatch(/TESSERA_LOG_LEVEL: .*got "loud"/);
  });

  it('exits non-zero with a clear message when its database cannot be reached', () => {
    const { status, stdout } = boot('shard', {
      TESSERA_CLUSTER_KEY: KEY,
      TESSERA_DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none',
    });
    expect(status).toBe(1);
    const fatal = stdout.split('\n').find((line) => line.includes('"level":"fatal"'));
    expect(fatal).toBeDefined();
    expect(JSON.parse(fatal!).msg).toMatch(/tessera shard failed to start: .*ECONNREFUSED/);
  });
});
