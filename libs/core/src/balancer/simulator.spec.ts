import { describe, expect, it } from 'vitest';
import { BALANCER_MIGRATIONS_THROTTLING_MS } from './balancer-settings.js';
import { createSeededRandom, randomInt } from './seeded-random.js';
import type { BalancerScheduler } from './balancer-settings.js';
import { rangeKey } from './distribution.js';
import type { SimulatedMigration, SimulatedPlanning, SimulationReport, SimulationScenario } from './simulator.js';
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

/**
 * A donor of ten 64 MiB chunks, a donor of ten 1 MiB chunks and two empty shards, balanced on
 * chunk counts with no migration throttle: the small chunks' migrations end long before the big
 * ones', and only the round barrier tells the schedulers apart.
 */
function unevenDonors(scheduler: BalancerScheduler): SimulationScenario {
  return {
    name: 'uneven donors',
    seed: 3,
    maxChunkSizeBytes: MAX,
    mode: 'chunkCountOptimal',
    scheduler,
    migrationsThrottlingMs: 0,
    shards: [{ id: 'a' }, { id: 'b' }, { id: 'c' }, { id: 'd' }],
    chunks: [
      { shard: 'a', count: 10, sizeBytes: 64 * MB },
      { shard: 'b', count: 10, sizeBytes: MB },
    ],
  };
}

/** The report, every planning and every migration as it ran. */
function traced(s: SimulationScenario): { report: SimulationReport; plannings: SimulatedPlanning[]; migrations: SimulatedMigration[] } {
  const plannings: SimulatedPlanning[] = [];
  const migrations: SimulatedMigration[] = [];
  const report = simulateBalancing(s, { planned: (p) => plannings.push(p), migrationEnded: (m) => migrations.push(m) });
  return { report, plannings, migrations };
}

/** Pairs of migrations that run at the same time. */
function concurrentPairs(migrations: readonly SimulatedMigration[]): [SimulatedMigration, SimulatedMigration][] {
  return migrations.flatMap((x, i) =>
    migrations
      .slice(i + 1)
      .flatMap((y) => (x.startMs < y.endMs && y.startMs < x.endMs ? [[x, y] as [SimulatedMigration, SimulatedMigration]] : [])),
  );
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

describe('the continuous scheduler', () => {
  const continuous = (overrides: Partial<SimulationScenario> = {}): SimulationScenario =>
    scenario({ scheduler: 'continuous', ...overrides });

  it('is a function of its scenario and seed', () => {
    expect(simulateBalancing(continuous())).toEqual(simulateBalancing(continuous()));
    expect(simulateBalancing(continuous({ seed: 2 }))).not.toEqual(simulateBalancing(continuous()));
    expect(traced(unevenDonors('continuous')).migrations).toEqual(traced(unevenDonors('continuous')).migrations);
  });

  it('converges with the empty shard within 3 max chunk sizes of the others and loses no data, through failures too', () => {
    for (const report of [simulateBalancing(continuous()), simulateBalancing(continuous({ failureRate: 0.3 }))]) {
      expect(report.scheduler).toBe('continuous');
      expect(report.converged).toBe(true);
      expect(report.status?.balancerCompliant).toBe(true);
      expect(report.maxShardBytes - report.minShardBytes).toBeLessThanOrEqual(3 * MAX);
      expect(report.finalBytes).toBe(report.initialBytes);
    }
  });

  it('starts the next migration of a shard freed early before a slower concurrent migration ends', () => {
    const rounds = traced(unevenDonors('rounds'));
    const continuously = traced(unevenDonors('continuous'));
    const startsDuringAnEarlierOne = (migrations: readonly SimulatedMigration[]): boolean =>
      concurrentPairs(migrations).some(([x, y]) => x.startMs !== y.startMs);
    expect(startsDuringAnEarlierOne(rounds.migrations)).toBe(false);
    expect(startsDuringAnEarlierOne(continuously.migrations)).toBe(true);
    expect(continuously.report.migrations).toBe(rounds.report.migrations);
    expect(continuously.report.simulatedMs).toBeLessThan(rounds.report.simulatedMs);
  });

  it('never plans a migration on a shard that is in one still in flight', () => {
    const fourShards = continuous({ shards: [{ id: 'a' }, { id: 'b' }, { id: 'c' }, { id: 'd' }], failureRate: 0.1 });
    for (const s of [unevenDonors('continuous'), fourShards]) {
      const pairs = concurrentPairs(traced(s).migrations);
      expect(pairs.length).toBeGreaterThan(0);
      const inTwoAtOnce = pairs.flatMap(([x, y]) =>
        [x.plan.from, x.plan.to].filter((shard) => shard === y.plan.from || shard === y.plan.to),
      );
      expect(inTwoAtOnce).toEqual([]);
    }
  });

  it('plans while a migration is in flight with its chunk still on the donor', () => {
    const { plannings, migrations } = traced(unevenDonors('continuous'));
    const seen = plannings.flatMap((p) =>
      migrations
        .filter((m) => m.startMs < p.nowMs && p.nowMs < m.endMs)
        .map((m) => ({ on: p.chunks.find((c) => rangeKey(c.range) === rangeKey(m.plan.range))?.shard, donor: m.plan.from })),
    );
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.filter((s) => s.on !== s.donor)).toEqual([]);
  });

  it('sleeps no migration throttle between migrations', () => {
    const instant = continuous({ migrationOverheadMs: 0, migrationBytesPerSecond: Number.MAX_SAFE_INTEGER });
    const report = simulateBalancing(instant);
    expect(report.rounds).toBeGreaterThan(1);
    expect(report.simulatedMs).toBe(0);
  });

  it('stops after maxRounds planning events and says it did not converge', () => {
    const report = simulateBalancing(continuous({ maxRounds: 2 }));
    expect(report.converged).toBe(false);
    expect(report.rounds).toBe(2);
  });
});
