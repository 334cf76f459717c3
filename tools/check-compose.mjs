#!/usr/bin/env node
// Checks that docker-compose.yml parses and is valid, with Debian's docker-compose (no engine
// needed). Where docker-compose is missing it says so and passes, except under CI (CI=true),
// where .ci/run installs it and its absence is a failure.
import { spawnSync } from 'node:child_process';

const run = spawnSync('docker-compose', ['-f', 'docker-compose.yml', 'config', '--quiet'], { encoding: 'utf8' });
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
console.log('check:compose: docker-compose.yml is valid');
