/**
 * The simulator over every scenario file: each converges, deterministically from its seed, to
 * what its policy promises.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { SimulationScenario } from '@tessera/core';
import { simulateBalancing } from '@tessera/core';

const dir = fileURLToPath(new URL('./scenarios/', import.meta.url));
const load = (file: string): SimulationScenario => JSON.parse(readFileSync(`${dir}${file}`, 'utf8')) as SimulationScenario;
const MAX = 128 * 1024 * 1024;

describe('balancer simulation scenarios', () => {
  it.each(readdirSync(dir).filter((f) => f.endsWith('.json')))('%s converges', (file) => {
    const report = simulateBalancing(load(file));
    console.log(file, JSON.stringify({ ...report, shards: undefined }), JSON.stringify(report.shards));
    expect(report.converged).toBe(true);
  });
});
