import { percentile } from '@tessera/core';
import type { CrudSettings } from './crud-settings.js';
import { isSteady } from './steady-state.js';

/** How a run's warm-up went: its length and each window's figure, printed with the results. */
export interface Warmup {
  readonly seconds: number;
  readonly windows: string[];
  readonly steady: boolean;
}

/** One row of the inserts' table: documents per second of each way, and the goal of the router's ratio to raw pg. */
export interface InsertResult {
  readonly what: string;
  readonly router: number;
  readonly floor: number;
  readonly raw: number;
  readonly goal: number;
}

/** Retryable inserts through the router against the same inserts without a session (issue 25: at most 10% more cost). */
export interface RetryableResult {
  readonly what: string;
  /** Documents per second of the two measured runs, one after the other. */
  readonly sequential: { plain: number; retryable: number };
  /** Documents per second of each way in slices taken in turns; the goal is judged on their totals. */
  readonly slices: ReadonlyArray<{ plain: number; retryable: number }>;
}

/**
 * Plain inserts through the router with a feature on and off, in slices taken in turns: the
 * shards' size triggers (issue 29's write tracking), and authorization (a router that checks an
 * API key on every request against one that does not).
 */
export interface OnOffResult {
  readonly what: string;
  readonly feature: 'size triggers' | 'authorization';
  /** How the slices were taken: one way after the other (the default), or both at once on twin processes. */
  readonly taken?: 'in turns' | 'side by side';
  /** Documents per second of each way in each slice. */
  readonly slices: ReadonlyArray<{ on: number; off: number }>;
  /** The least on ÷ off the feature's goal allows, if it has one. */
  readonly goal?: number;
}

/** The least retryable ÷ plain throughput the goal allows: 10% more cost per document. */
const RETRYABLE_GOAL = 1 / 1.1;

/** One way's measured point reads: each read's latency in ms, in the order made, taken in slices of `sliceLength`. */
export interface ReadResult {
  readonly what: string;
  readonly latencies: number[];
  readonly sliceLength: number;
}

/** The CPU each process group spent during a measured run, over `count` units of `per`, and the background work meanwhile. */
export interface CpuRow {
  readonly what: string;
  readonly per: string;
  readonly spent: Map<string, number | undefined>;
  readonly count: number;
  readonly meanwhile: string;
}

const CPU_GROUPS = ['client', 'router', 'shards', 'config', 'postgres'];

/** What bench:crud's phases found, in the order they found it; printed once at the end. */
export class CrudReport {
  readonly warmups: Array<{ what: string; warmup: Warmup }> = [];
  readonly inserts: InsertResult[] = [];
  readonly retryable: RetryableResult[] = [];
  readonly onOff: OnOffResult[] = [];
  readonly reads: ReadResult[] = [];
  readonly cpuRows: CpuRow[] = [];

  /** Records the warm-up of `what`, `seconds` long: its windows' `scores` (higher is better), printed as `windows`. */
  recordWarmup(what: string, seconds: number, scores: readonly number[], windows: string[]): void {
    this.warmups.push({ what, warmup: { seconds, windows, steady: isSteady(scores) } });
  }

  print(settings: CrudSettings): void {
    console.log(
      `\nbench:crud — ${settings.concurrency} concurrent clients, ${settings.seconds} s per run once its warm-up is steady, ~200 B documents, hashed shard key over 3 shards\n`,
    );
    this.printWarmups(settings);
    console.log('');
    this.printInserts();
    this.printRetryable();
    this.printOnOff();
    this.printReads();
    this.printCpu();
    console.log('\nbackground work during each measured run (Postgres checkpoints; the cluster changelog but balancer rounds):');
    for (const row of this.cpuRows) console.log(`  ${row.what}: ${row.meanwhile}`);
  }

  private printWarmups(settings: CrudSettings): void {
    console.log(
      `warm-ups (windows of ${settings.windowSeconds} s, until none of the last 3 beat the best before by 3%, at least ${settings.insertWarmupMinSeconds} s for inserts and ${settings.readWarmupMinSeconds} s for reads; at most ${settings.warmupMaxSeconds} s):`,
    );
    for (const { what, warmup } of this.warmups) {
      console.log(
        `  ${what}: ${warmup.seconds.toFixed(0)} s${warmup.steady ? '' : ' (NOT steady: cut at the limit)'}: ${warmup.windows.join(', ')}`,
      );
    }
  }

  private printInserts(): void {
    console.log('what                        router docs/s   floor docs/s   raw pg docs/s   ratio   floor ratio   goal');
    for (const r of this.inserts) {
      const ratio = r.router / r.raw;
      console.log(
        `${r.what.padEnd(27)} ${r.router.toFixed(0).padStart(13)}   ${r.floor.toFixed(0).padStart(12)}   ${r.raw.toFixed(0).padStart(13)}   ${ratio.toFixed(2).padStart(5)}   ${(r.floor / r.raw).toFixed(2).padStart(11)}   >= ${r.goal} ${ratio >= r.goal ? 'met' : 'NOT met'}`,
      );
    }
  }

  private printRetryable(): void {
    for (const r of this.retryable) {
      // Equal slices: the mean of each way's rates is its rate over the slices.
      const plain = r.slices.reduce((sum, s) => sum + s.plain, 0) / r.slices.length;
      const retryable = r.slices.reduce((sum, s) => sum + s.retryable, 0) / r.slices.length;
      const ratio = retryable / plain;
      const perSlice = r.slices.map((s) => (s.retryable / s.plain).toFixed(2)).join(', ');
      const sequential = (r.sequential.retryable / r.sequential.plain).toFixed(2);
      console.log(
        `${`${r.what}, retryable`.padEnd(38)}: ${retryable.toFixed(0)} docs/s against ${plain.toFixed(0)} without a session, in turns: ratio ${ratio.toFixed(2)} (goal >= ${RETRYABLE_GOAL.toFixed(2)}: ${ratio >= RETRYABLE_GOAL ? 'met' : 'NOT met'}; slices ${perSlice}; the measured runs one after the other: ${sequential})`,
      );
    }
  }

  private printOnOff(): void {
    for (const r of this.onOff) {
      const on = r.slices.reduce((sum, s) => sum + s.on, 0) / r.slices.length;
      const off = r.slices.reduce((sum, s) => sum + s.off, 0) / r.slices.length;
      const perSlice = r.slices.map((s) => (s.on / s.off).toFixed(2)).join(', ');
      const goal = r.goal === undefined ? '' : ` (goal >= ${r.goal.toFixed(2)}: ${on / off >= r.goal ? 'met' : 'NOT met'})`;
      console.log(
        `${`${r.what}, ${r.feature}`.padEnd(38)}: ${on.toFixed(0)} docs/s against ${off.toFixed(0)} off, ${r.taken ?? 'in turns'}: ratio ${(on / off).toFixed(2)} (slices ${perSlice})${goal}`,
      );
    }
  }

  /** Each way's p50 and p99, and each slice's p50; the first way is the router's, which has a goal. */
  private printReads(): void {
    for (const [i, { what, latencies, sliceLength }] of this.reads.entries()) {
      const sorted = [...latencies].sort((a, b) => a - b);
      const p50 = percentile(sorted, 50);
      const slices = Array.from({ length: Math.ceil(latencies.length / sliceLength) }, (_, s) =>
        percentile(
          latencies.slice(s * sliceLength, (s + 1) * sliceLength).sort((a, b) => a - b),
          50,
        ).toFixed(2),
      );
      console.log(
        `point read by shard key ${what.padEnd(14)}: p50 ${p50.toFixed(2)} ms, p99 ${percentile(sorted, 99).toFixed(2)} ms over ${latencies.length} reads (slices' p50s ${slices.join(', ')})${i === 0 ? ` (goal p50 <= 2 ms: ${p50 <= 2 ? 'met' : 'NOT met'})` : ''}`,
      );
    }
  }

  private printCpu(): void {
    console.log(
      '\nCPU ms spent per document or read, by process (from /proc; the machine has 2 cores shared by all of them; for the floor, router is the relay and shards the stores):',
    );
    console.log(`${'what'.padEnd(36)}${CPU_GROUPS.map((g) => g.padStart(9)).join('')}    total`);
    for (const row of this.cpuRows) {
      const figures = CPU_GROUPS.map((g) => row.spent.get(g));
      const total = figures.reduce<number>((sum, f) => sum + (f ?? 0), 0);
      const cell = (ms: number | undefined) => (ms === undefined ? 'n/a' : (ms / row.count).toFixed(3)).padStart(9);
      console.log(`${`${row.what} (per ${row.per})`.padEnd(36)}${figures.map(cell).join('')}${cell(total)}`);
    }
  }
}
