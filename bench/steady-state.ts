/**
 * When a warm-up is over. A just-started Node process reaches its steady speed only once V8 has
 * compiled its hot paths, and on a small machine that takes tens of seconds of load, so a run
 * measured after a fixed short warm-up measures mostly that ramp (the ramp as measured is in
 * docs/benchmarks.md).
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
