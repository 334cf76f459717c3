import { describe, expect, it } from 'vitest';
import { BALANCER_MIGRATIONS_THROTTLING_MS } from './balancer-settings.js';
import { createSeededRandom, randomInt } from './seeded-random.js';
import type { SimulationScenario } from './simulator.js';
import { expandChunkRuns, simulateBalancing } from './simulator.js';

const MB = 1024 * 1024;
const MAX = 64 * MB;

/** Two loaded shards and an empty one. */
function scenario(overrides: Partial<SimulationScenario> = {}): SimulationScenario {
  return {
    name: 'unit',
    seed: 1,
    maxChunkSizeBytes: MAX,
    shards: [{ id: 'a' }, { id: 'b' }, { id: 'c' }],
    chunks: [
      { shard: 'a', count: 30, sizeBytes: { min: 16 * MB, max: 64 * MB } },
      { shard: 'b', count: 30, sizeBytes: { min: 16 * MB, max: 64 * MB } },
    ],
    ...overrides,
  };
}

describe('the seeded random', () => {
  it('gives the same sequence for the same seed and another for another seed', () => {
    const draw = (seed: number) => {
      const r = createSeededRandom(seed);
      return Array.from({ length: 5 }, () => r.nextFloat());
    };
    expect(draw(42)).toEqual(draw(42));
    expect(draw(42)).not.toEqual(draw(43));
  });

  it('draws floats in [0, 1) and integers within their bounds', () => {
    const r = createSeededRandom(9);
    for (let i = 0; i < 2000; i++) {
      const f = r.nextFloat();
      expect(f).toBeGreaterThanOrEqual(0);
      expect(f).toBeLessThan(1);
      const n = randomInt(r, 3, 5);
      expect([3, 4, 5]).toContain(n);
    }
  });
});

describe('the balancer simulator', () => {
  it('is a function of its scenario and seed', () => {
    expect(simulateBalancing(scenario())).toEqual(simulateBalancing(scenario()));
    expect(simulateBalancing(scenario({ seed: 2 }))).not.toEqual(simulateBalancing(scenario()));
  });

  it('converges with the empty shard within 3 max chunk sizes of the others and loses no data', () => {
    const report = simulateBalancing(scenario());
    expect(report.converged).toBe(true);
    expect(report.maxShardBytes - report.minShardBytes).toBeLessThanOrEqual(3 * MAX);
    expect(report.shards.c?.chunks).toBeGreaterThan(0);
    expect(report.finalBytes).toBe(report.initialBytes);
    expect(report.rounds).toBeGreaterThan(0);
    expect(report.simulatedMs).toBeGreaterThan(0);
  });

  it('moves a chunk per shard pair per round, so 3 shards take a round per migration', () => {
    const report = simulateBalancing(scenario());
    expect(report.migrations).toBe(report.rounds);
  });

  it("starts a round's migrations balancerMigrationsThrottlingMs after the previous round's ended, the first at once", () => {
    const instant = { migrationOverheadMs: 0, migrationBytesPerSecond: Number.MAX_SAFE_INTEGER };
    const report = simulateBalancing(scenario(instant));
    expect(report.rounds).toBeGreaterThan(1);
    expect(report.simulatedMs).toBe((report.rounds - 1) * BALANCER_MIGRATIONS_THROTTLING_MS);
    expect(simulateBalancing(scenario({ ...instant, migrationsThrottlingMs: 0 })).simulatedMs).toBe(0);
  });

  it('retries through injected migration failures and still converges', () => {
    const report = simulateBalancing(scenario({ failureRate: 0.3 }));
    expect(report.failedMigrations).toBeGreaterThan(0);
    expect(report.converged).toBe(true);
    expect(report.status?.balancerCompliant).toBe(true);
  });

  it('stops at maxRounds and says it did not converge', () => {
    const report = simulateBalancing(scenario({ maxRounds: 2 }));
    expect(report.converged).toBe(false);
    expect(report.rounds).toBe(2);
  });

  it('lays out runs of random length without two neighbouring runs on one shard', () => {
    const runs = expandChunkRuns(
      [{ shards: ['a', 'b', 'c'], count: 100, sizeBytes: 1, runLength: { min: 2, max: 2 } }],
      createSeededRandom(4),
    );
    expect(runs).toHaveLength(100);
    for (let i = 2; i < 100; i += 2) expect(runs[i]?.shard).not.toBe(runs[i - 1]?.shard);
  });
});
