#!/usr/bin/env node
// `npm run load:<workload>`: runs loadtests/<workload>.ts with k6, filling in what a local
// cluster (`npm start`) needs: ADMIN_TOKEN and VIEWER_TOKEN from .tessera/control-plane.tokens,
// and API_KEY from .tessera/root.key, unless set. Every other option is an environment variable the script reads (loadtests/README.md).
// Usage: node tools/run-k6.mjs <workload> [k6 run flags...]
// Exits with k6's status; 2 on a bad workload name; 127 when k6 is not installed.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const loadtests = join(root, 'loadtests');
const workloads = readdirSync(loadtests)
  .filter((name) => name.endsWith('.ts') && !name.endsWith('.d.ts'))
  .map((name) => name.slice(0, -'.ts'.length))
  .sort();

const [workload, ...k6Flags] = process.argv.slice(2);
if (workload === undefined || !workloads.includes(workload)) {
  console.error(`run-k6: name a workload: ${workloads.join(', ')}${workload === undefined ? '' : ` (got "${workload}")`}`);
  process.exit(2);
}

const k6 = process.env.K6_BIN || 'k6';
const probe = spawnSync(k6, ['version'], { encoding: 'utf8' });
if (probe.error !== undefined) {
  console.error(
    [
      `run-k6: k6 is not installed (could not run "${k6}": ${probe.error.code ?? probe.error.message}).`,
      '  Install k6 v1.0 or newer, which runs TypeScript natively: https://grafana.com/docs/k6/latest/set-up/install-k6/',
      '  (or set K6_BIN to its path), or run the workload in the official image through docker-compose:',
      `    docker-compose --profile load run --rm k6 run /loadtests/${workload}.ts`,
    ].join('\n'),
  );
  process.exit(127);
}

const env = { ...process.env };
const tokensFile = join(root, '.tessera', 'control-plane.tokens');
if (!env.ADMIN_TOKEN && existsSync(tokensFile)) {
  const tokens = JSON.parse(readFileSync(tokensFile, 'utf8'));
  env.ADMIN_TOKEN = tokens.admin;
  env.VIEWER_TOKEN ||= tokens.viewer;
  console.log(`run-k6: control plane tokens from ${tokensFile}`);
}
const rootKeyFile = join(root, '.tessera', 'root.key');
if (!env.API_KEY && existsSync(rootKeyFile)) {
  env.API_KEY = readFileSync(rootKeyFile, 'utf8').trim();
  console.log(`run-k6: the root user's API key from ${rootKeyFile}`);
}
// handleSummary writes loadtests/results/<workload>-summary.json unless SUMMARY_PATH says otherwise.
mkdirSync(join(loadtests, 'results'), { recursive: true });

console.log(`run-k6: ${probe.stdout.trim()}: k6 run ${[...k6Flags, `loadtests/${workload}.ts`].join(' ')}`);
const child = spawn(k6, ['run', ...k6Flags, `loadtests/${workload}.ts`], { cwd: root, env, stdio: 'inherit' });
// k6 handles Ctrl-C itself (it stops the VUs, then runs teardown and handleSummary): let it.
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
child.on('exit', (code, signal) => process.exit(code ?? (signal === null ? 1 : 128)));
