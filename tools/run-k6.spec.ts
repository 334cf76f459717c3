import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const launcher = new URL('./run-k6.mjs', import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), 'tessera-run-k6-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function launch(args: string[], env: Record<string, string>): { status: number | null; output: string } {
  const run = spawnSync(process.execPath, [launcher, ...args], { encoding: 'utf8', env: { PATH: '/usr/bin:/bin', ...env } });
  return { status: run.status, output: run.stdout + run.stderr };
}

describe('npm run load:<workload>', () => {
  it('says how to get k6 and exits non-zero when k6 is not installed', () => {
    const result = launch(['insert-random'], { K6_BIN: join(dir, 'no-such-k6') });
    expect(result.status).toBe(127);
    expect(result.output).toContain('k6 is not installed');
    expect(result.output).toContain('docker-compose --profile load run --rm k6 run /loadtests/insert-random.ts');
  });

  it('refuses a workload that does not exist, naming the ones that do', () => {
    const result = launch(['insert-sideways'], {});
    expect(result.status).toBe(2);
    expect(result.output).toContain('insert-monotonic, insert-random, retryable-writes, router-roll, subscriptions');
  });

  it('runs k6 on the workload script with the environment and passes its exit status on', () => {
    const fake = join(dir, 'k6');
    const record = join(dir, 'record');
    writeFileSync(
      fake,
      `#!/bin/sh\nif [ "$1" = version ]; then echo "k6 v1.4.0"; exit 0; fi\necho "$@ $ADMIN_TOKEN $VUS" > ${record}\nexit 99\n`,
    );
    chmodSync(fake, 0o755);
    const result = launch(['crud-mix', '--quiet'], { K6_BIN: fake, ADMIN_TOKEN: 'admin-xyz', VUS: '3' });
    expect(result.status).toBe(99);
    expect(readFileSync(record, 'utf8').trim()).toBe('run --quiet loadtests/crud-mix.ts admin-xyz 3');
  });
});
