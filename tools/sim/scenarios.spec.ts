/**
 * The simulator over the scenario files (the deterministic-simulation tier): each converges,
 * deterministically from its seed, to what its policy promises.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { SimulationReport, SimulationScenario } from '@tessera/core';
import { simulateBalancing } from '@tessera/core';

const dir = fileURLToPath(new URL('./scenarios/', import.meta.url));
const load = (name: string): SimulationScenario => JSON.parse(readFileSync(`${dir}${name}.json`, 'utf8')) as SimulationScenario;
const MAX = 128 * 1024 * 1024;
const reports = new Map<string, SimulationReport>();
const run = (name: string): SimulationReport => {
  const cached = reports.get(name);
  if (cached) return cached;
  const report = simulateBalancing(load(name));
  reports.set(name, report);
  return report;
};

describe('balancer simulation scenarios', () => {
  it.each(
    readdirSync(dir)
      .filter((f) => f.endsWith('.json'))
      .map((f) => f.replace(/\.json$/, '')),
  )('%s converges to a compliant collection', (name) => {
    const report = run(name);
    expect(report.converged).toBe(true);
    expect(report.status?.balancerCompliant).toBe(true);
    expect(report.finalBytes).toBe(report.initialBytes);
  });

  it('gives the same report for the same scenario and seed', () => {
    expect(simulateBalancing(load('drain-shard'))).toEqual(run('drain-shard'));
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
