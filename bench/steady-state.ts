/**
 * When a warm-up is over. A just-started Node process reaches its steady speed only once V8 has
 * compiled its hot paths, and on this 2-core VM that takes 20-40 s of load: a router's
 * single-document inserts ran at 650, 1130, 1290, 1500, 1660 and 1720 documents/s in consecutive
 * 5 s windows, and its point reads took 4.3 ms p50 in the first 3 s and 2.3 ms 25 s later (each
 * TurboFan compilation of a hot function took 20-100 ms here, 2.4 s in all for the router). A run
 * measured after a fixed 2 s measured mostly that ramp.
 *
 * So a warm-up takes windows of the same load until the figure has stopped climbing: none of the
 * last `patience` windows beat the best window before it by more than `tolerance`. Scores are
 * higher-is-better (a rate, or the inverse of a latency).
 */
export interface SteadyStateRule {
  /** How many windows in a row must bring no new best. */
  readonly patience: number;
  /** What counts as a new best: more than this fraction above the best before it. */
  readonly tolerance: number;
}

export const STEADY_STATE: SteadyStateRule = { patience: 3, tolerance: 0.03 };

/** True when the last `patience` of `scores` each stayed within `tolerance` of the best score before it. */
export function isSteady(scores: readonly number[], rule: SteadyStateRule = STEADY_STATE): boolean {
  if (scores.length <= rule.patience) return false;
  let best = Math.max(...scores.slice(0, scores.length - rule.patience));
  for (const score of scores.slice(scores.length - rule.patience)) {
    if (score > best * (1 + rule.tolerance)) return false;
    best = Math.max(best, score);
  }
  return true;
}
