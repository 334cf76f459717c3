/** The `p`-th percentile of `sorted` (ascending, not empty): the value at that rank, no interpolation. */
export function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}
