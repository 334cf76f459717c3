/**
 * `npm run sim [-- scenario-name... ] [--seed N]`: runs the balancer simulator over the scenario
 * files in tools/sim/scenarios/ (all of them by default) and prints, per scenario, the rounds
 * and simulated time to convergence and the final max/min data per shard under the scenario's
 * scheduler (default `rounds`), then the simulated time under each scheduler and their ratio.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { SimulationReport, SimulationScenario } from '@tessera/core';
import { simulateBalancing } from '@tessera/core';

// From dist/tools/sim/ or tools/sim/, the scenario files stay in the source tree.
const candidates = ['../../../tools/sim/scenarios/', './scenarios/'].map((p) => fileURLToPath(new URL(p, import.meta.url)));

function scenarioDir(): string {
  for (const dir of candidates) {
    try {
      readdirSync(dir);
      return dir;
    } catch {
      // try the next location
    }
  }
  throw new Error(`No scenario directory at ${candidates.join(' or ')}`);
}

const mib = (bytes: number): string => `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
const duration = (ms: number): string => (ms >= 60_000 ? `${(ms / 60_000).toFixed(1)} min` : `${(ms / 1000).toFixed(1)} s`);

function print(report: SimulationReport, description: string | undefined): void {
  const reasons = Object.entries(report.migrationsByReason)
    .map(([reason, n]) => `${reason} ${n}`)
    .join(', ');
  const lines = [
    `${report.scenario} (seed ${report.seed}, ${report.scheduler} scheduler)${description ? `: ${description}` : ''}`,
    `  ${report.converged ? 'converged' : 'DID NOT CONVERGE'} after ${report.rounds} rounds, ${duration(report.simulatedMs)} simulated` +
      `; compliant: ${report.status?.balancerCompliant === true ? 'yes' : `no (${report.status?.firstComplianceViolation ?? 'unknown'})`}`,
    `  migrations ${report.migrations}${reasons ? ` (${reasons})` : ''}, failed ${report.failedMigrations}, refused as too big ${report.tooBigRefusals}, moved ${mib(report.bytesMoved)}` +
      `; splits ${report.splits}, merges ${report.merges}, dataSize ${report.dataSizes}; chunks ${report.initialChunks} -> ${report.finalChunks} (jumbo ${report.jumboChunks})`,
    `  data per active shard: max ${mib(report.maxShardBytes)}, min ${mib(report.minShardBytes)}, difference ${mib(report.maxShardBytes - report.minShardBytes)}`,
    `  ${Object.entries(report.shards)
      .map(([shard, s]) => `${shard} ${s.chunks} chunks ${mib(s.bytes)}`)
      .join(' | ')}`,
  ];
  console.log(lines.join('\n'));
}

function printSchedulers(rounds: SimulationReport, continuous: SimulationReport, parallel: SimulationReport): void {
  const time = (r: SimulationReport): string => `${duration(r.simulatedMs)}${r.converged ? '' : ' (did not converge)'}`;
  const ratio = (r: SimulationReport): string => (rounds.simulatedMs > 0 ? (r.simulatedMs / rounds.simulatedMs).toFixed(2) : 'n/a');
  console.log(
    `  schedulers: rounds ${time(rounds)}, continuous ${time(continuous)} (${ratio(continuous)} of rounds), ` +
      `continuous with parallel donors ${time(parallel)} (${ratio(parallel)} of rounds)`,
  );
}

function main(): void {
  const { values, positionals } = parseArgs({ options: { seed: { type: 'string' } }, allowPositionals: true });
  const dir = scenarioDir();
  const names =
    positionals.length > 0
      ? positionals
      : readdirSync(dir)
          .filter((f) => f.endsWith('.json'))
          .map((f) => f.replace(/\.json$/, ''))
          .sort();
  for (const name of names) {
    const scenario = JSON.parse(readFileSync(`${dir}${name}.json`, 'utf8')) as SimulationScenario;
    const seeded = values.seed === undefined ? scenario : { ...scenario, seed: Number(values.seed) };
    const rounds = simulateBalancing({ ...seeded, scheduler: 'rounds' });
    const continuous = simulateBalancing({ ...seeded, scheduler: 'continuous', maxDonationsPerShard: 1 });
    const parallel = simulateBalancing({ ...seeded, scheduler: 'continuous', maxDonationsPerShard: 0 });
    print(seeded.scheduler === 'continuous' ? continuous : rounds, scenario.description);
    printSchedulers(rounds, continuous, parallel);
  }
}

main();
