#!/usr/bin/env node
// Checks that docker-compose.yml parses and is valid, with Debian's docker-compose (no engine
// needed), and that it refuses to start without TESSERA_ROOT_KEY. Where docker-compose is
// missing it says so and passes, except under CI (CI=true), where .ci/run installs it and its
// absence is a failure.
import { spawnSync } from 'node:child_process';

const compose = (env) => spawnSync('docker-compose', ['-f', 'docker-compose.yml', 'config', '--quiet'], { encoding: 'utf8', env });
const withoutRootKey = { ...process.env };
delete withoutRootKey.TESSERA_ROOT_KEY;
const run = compose({ ...withoutRootKey, TESSERA_ROOT_KEY: 'k'.repeat(32) });
if (run.error?.code === 'ENOENT') {
  const message = 'docker-compose is not installed, so docker-compose.yml was not checked (apt-get install docker-compose)';
  if (process.env.CI === 'true') {
    console.error(`check:compose: ${message}`);
    process.exit(1);
  }
  console.warn(`check:compose: skipped: ${message}`);
  process.exit(0);
}
if (run.status !== 0) {
  console.error(`check:compose: docker-compose.yml is invalid:\n${run.stderr}`);
  process.exit(1);
}
// No deployment starts open: without a root key, docker-compose refuses the file.
const open = compose(withoutRootKey);
if (open.status === 0 || !/TESSERA_ROOT_KEY/.test(open.stderr)) {
  console.error(`check:compose: docker-compose.yml must refuse to start without TESSERA_ROOT_KEY; it answered:\n${open.stderr}`);
  process.exit(1);
}
console.log('check:compose: docker-compose.yml is valid, and refuses to start without TESSERA_ROOT_KEY');
