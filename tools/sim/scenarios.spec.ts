/**
 * The simulator over the scenario files (the deterministic-simulation tier): each converges,
 * deterministically from its seed, to what its policy promises, under both schedulers, and
 * under the continuous one with parallel donors (`maxDonationsPerShard: 0`).
 */
import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { SimulationReport, SimulationScenario } from '@tessera/core';
import { simulateBalancing } from '@tessera/core';

const dir = fileURLToPath(new URL('./scenarios/', import.meta.url));
const load = (name: string): SimulationScenario => JSON.parse(readFileSync(`${dir}${name}.json`, 'utf8')) as SimulationScenario;
const MAX = 128 * 1024 * 1024;
const names = readdirSync(dir)
  .filter((f) => f.endsWith('.json'))
  .map((f) => f.replace(/\.json$/, ''))
  .sort();
const reports = new Map<string, SimulationReport>();
/** How the main thread plans: the two schedulers, and the continuous one with parallel donors. */
type Variant = 'rounds' | 'continuous' | 'parallel';
const VARIANTS: readonly Variant[] = ['rounds', 'continuous', 'parallel'];
/** The scenario's report under `variant`; the files leave the scheduler unset, so `rounds` is their own. */
const run = (name: string, variant: Variant = 'rounds'): SimulationReport => {
  const key = `${name}/${variant}`;
  const cached = reports.get(key);
  if (cached) return cached;
  const report = simulateBalancing({
    ...load(name),
    scheduler: variant === 'rounds' ? 'rounds' : 'continuous',
    maxDonationsPerShard: variant === 'parallel' ? 0 : 1,
  });
  reports.set(key, report);
  return report;
};

describe('balancer simulation scenarios', () => {
  it.each(names.flatMap((name) => VARIANTS.map((variant) => [name, variant] as const)))(
    '%s converges to a compliant collection under the %s scheduler without losing data',
    (name, variant) => {
      const report = run(name, variant);
      expect(report.scheduler).toBe(variant === 'rounds' ? 'rounds' : 'continuous');
      expect(report.converged).toBe(true);
      expect(report.status?.balancerCompliant).toBe(true);
      expect(report.finalBytes).toBe(report.initialBytes);
    },
  );

  it.each(names)('%s converges no later under the continuous scheduler than under rounds, parallel donors or not', (name) => {
    const rounds = run(name, 'rounds');
    const continuous = run(name, 'continuous');
    const parallel = run(name, 'parallel');
    const seconds = (ms: number): string => (ms / 1000).toFixed(1);
    const ratio = (r: SimulationReport): string => (r.simulatedMs / rounds.simulatedMs).toFixed(2);
    console.log(
      `${name}: rounds ${seconds(rounds.simulatedMs)} s, continuous ${seconds(continuous.simulatedMs)} s (${ratio(continuous)}),` +
        ` parallel donors ${seconds(parallel.simulatedMs)} s (${ratio(parallel)})`,
    );
    expect(continuous.simulatedMs).toBeLessThanOrEqual(rounds.simulatedMs);
    expect(parallel.simulatedMs).toBeLessThanOrEqual(rounds.simulatedMs);
  });

  it('drains one shard into three, and spreads one donor over three new shards, faster with parallel donors', () => {
    for (const name of ['drain-into-three', 'small-chunks-donor']) {
      const serial = run(name, 'continuous');
      const parallel = run(name, 'parallel');
      expect(parallel.migrations).toBeGreaterThan(0);
      expect(parallel.simulatedMs).toBeLessThan(serial.simulatedMs * 0.6);
    }
  });

  it('gives the same report for the same scenario and seed', () => {
    expect(simulateBalancing(load('drain-shard'))).toEqual(run('drain-shard'));
    expect(simulateBalancing({ ...load('drain-shard'), scheduler: 'continuous' })).toEqual(run('drain-shard', 'continuous'));
  });

  it('spreads 300 chunks over the new 4th shard until no two shards differ by more than 3 max chunk sizes', () => {
    const report = run('add-shard');
    expect(report.maxShardBytes - report.minShardBytes).toBeLessThanOrEqual(3 * MAX);
    expect(report.shards.shard3?.chunks).toBeGreaterThan(50);
    expect(report.migrationsByReason).toEqual({ imbalance: report.migrations });
  });

  it('balances the same cluster by chunk counts under the legacy policy', () => {
    const report = run('add-shard-chunk-count');
    const counts = Object.values(report.shards).map((s) => s.chunks);
    expect(Math.max(...counts) - Math.min(...counts)).toBeLessThan(2);
  });

  it('empties a draining shard', () => {
    const report = run('drain-shard');
    expect(report.shards.shard3).toEqual({ chunks: 0, bytes: 0 });
    expect(report.migrationsByReason.drain).toBeGreaterThan(0);
  });

  it('drains one shard into three under both schedulers', () => {
    for (const scheduler of ['rounds', 'continuous'] as const) {
      const report = run('drain-into-three', scheduler);
      expect(report.shards.shard0).toEqual({ chunks: 0, bytes: 0 });
      expect(report.migrationsByReason.drain).toBe(120);
    }
  });

  it('spreads 1,000 small chunks from one donor over 3 new shards under both schedulers', () => {
    for (const scheduler of ['rounds', 'continuous'] as const) {
      const report = run('small-chunks-donor', scheduler);
      for (const shard of ['shard1', 'shard2', 'shard3']) expect(report.shards[shard]?.chunks).toBeGreaterThan(200);
    }
  });

  it('splits at zone boundaries and moves every zone chunk onto a shard of its zone', () => {
    const report = run('zones');
    // EU starts inside chunk 20 and ends inside chunk 80; US ends inside the last chunk [1490, MaxKey).
    expect(report.splits).toBe(3);
    expect(report.migrationsByReason.zoneViolation).toBeGreaterThan(0);
    // shard0 is in no zone: it keeps only chunks outside EU and US, at most the 41 such chunks.
    expect(report.shards.shard0?.chunks).toBeLessThanOrEqual(41);
    expect(report.shards.shard3?.chunks).toBeGreaterThanOrEqual(50);
  });

  it('splits chunks refused as too big and marks the unsplittable ones jumbo, then balances around them', () => {
    const report = run('jumbo');
    expect(report.jumboChunks).toBe(2);
    expect(report.tooBigRefusals).toBeGreaterThanOrEqual(2 + 2);
    expect(report.splits).toBeGreaterThanOrEqual(2);
    expect(report.maxShardBytes - report.minShardBytes).toBeLessThanOrEqual(3 * MAX);
  });

  it('defragments 1,000 tiny chunks into a handful without losing data', () => {
    const report = run('defragment');
    expect(report.finalChunks).toBeLessThan(20);
    expect(report.merges).toBeGreaterThan(300);
    expect(report.migrationsByReason.defragmentation).toBeGreaterThan(0);
    expect(report.finalBytes).toBe(report.initialBytes);
  });
});
