// bench:balance's report: its rounds, the shards' sizes, and where the migrations spent their time.

/** What the bench reads of a donor's `moveChunk.from` changelog row. */
export interface MoveDetails {
  bytesCloned: number;
  phases: Array<{ phase: string; at: string }>;
}

export function describeSizes(sizes: Map<string, { stored: number; owned: number }>): string {
  return [...sizes].map(([shard, b]) => `${shard} ${mb(b.owned)} owned (${mb(b.stored)} stored, orphans included)`).join(', ');
}

export const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`;

/** What the bench reads of a `balancer.round` changelog row. */
export interface RoundDetails {
  migrations: Array<{ outcome: string }>;
  durationMs: number;
  selectionTimeMillis: number;
  throttleTimeMillis: number;
  migrationTimeMillis: number;
  /** Migrations the load throttle held back, and why (continuous scheduler). */
  held?: { count: number; why: string };
}

/**
 * Per round: when it started (the row is written at its end, durationMs after its start), the
 * gap since the previous round ended, its migrations, and its selection (snapshot included),
 * throttle and migration times; then their sums.
 */
export function printRounds(rows: ReadonlyArray<{ time: Date; details: RoundDetails }>, since: number): void {
  const sum = { selection: 0, throttle: 0, migration: 0, gaps: 0 };
  let previousEnd = since;
  rows.forEach(({ time, details: d }, i) => {
    const end = time.getTime();
    const start = end - d.durationMs;
    const moved = d.migrations.filter((m) => m.outcome === 'moved').length;
    console.log(
      `    round ${String(i + 1).padStart(3)} at ${((start - since) / 1000).toFixed(1).padStart(6)} s (+${start - previousEnd} ms): ` +
        `${moved}/${d.migrations.length} moved; selection ${d.selectionTimeMillis} ms, throttle ${d.throttleTimeMillis} ms, ` +
        `migrations ${d.migrationTimeMillis} ms${d.held ? `; held ${d.held.count}: ${d.held.why}` : ''}`,
    );
    sum.selection += d.selectionTimeMillis;
    sum.throttle += d.throttleTimeMillis;
    sum.migration += d.migrationTimeMillis;
    sum.gaps += start - previousEnd;
    previousEnd = end;
  });
  const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  console.log(
    `  rounds, summed: selection ${s(sum.selection)}, throttle ${s(sum.throttle)}, migrations ${s(sum.migration)}, ` +
      `before and between rounds ${s(sum.gaps)} (negative: rounds overlapped, as the continuous scheduler's do)`,
  );
}
/** A migration's time from its first reported phase to its last. */
function spanOf(phases: ReadonlyArray<{ at: string }>): number {
  return Date.parse(phases.at(-1)!.at) - Date.parse(phases[0]!.at);
}

/** The most migrations under way at once, by their donors' phase times (from registration to the last phase). */
function peakConcurrent(moves: ReadonlyArray<{ details: { phases: Array<{ at: string }> } }>): number {
  const edges = moves.flatMap(({ details }) => [
    { at: Date.parse(details.phases[0]!.at), step: 1 },
    { at: Date.parse(details.phases.at(-1)!.at), step: -1 },
  ]);
  edges.sort((a, b) => a.at - b.at || a.step - b.step);
  let now = 0;
  let peak = 0;
  for (const e of edges) peak = Math.max(peak, (now += e.step));
  return peak;
}

/**
 * Where the migrations' time went: each phase until the next, averaged over them; the slowest
 * one's phases; the time inside migrations against the run's `seconds`, and the most at once.
 */
export function printMigrations(moves: ReadonlyArray<{ details: MoveDetails }>, seconds: number): void {
  const phaseMs = new Map<string, number>();
  let migrating = 0;
  for (const { details } of moves) {
    const times = details.phases.map((p) => Date.parse(p.at));
    details.phases.slice(0, -1).forEach((p, i) => phaseMs.set(p.phase, (phaseMs.get(p.phase) ?? 0) + times[i + 1]! - times[i]!));
    migrating += times.at(-1)! - times[0]!;
  }
  const perMove = (ms: number) => `${(ms / Math.max(1, moves.length)).toFixed(0)} ms`;
  console.log(`  a migration, on average: ${[...phaseMs].map(([phase, ms]) => `${phase} ${perMove(ms)}`).join(', ')}`);
  const slowest = [...moves].sort((a, b) => spanOf(b.details.phases) - spanOf(a.details.phases))[0];
  if (slowest !== undefined) {
    const times = slowest.details.phases.map((p) => Date.parse(p.at));
    const steps = slowest.details.phases.slice(0, -1).map((p, i) => `${p.phase} ${times[i + 1]! - times[i]!} ms`);
    console.log(`  the slowest migration (${mb(slowest.details.bytesCloned)}): ${steps.join(', ')}`);
  }
  console.log(
    `  time inside migrations: ${(migrating / 1000).toFixed(1)} s of ${seconds.toFixed(1)} s; at most ${peakConcurrent(moves)} at once`,
  );
}
