/**
 * Runs at most `concurrency` tasks at once and keeps at most `maxWaiting` waiting for a turn, in
 * order; past that, `run` refuses at once with the caller's error. For work that is costly by
 * design (a slow password hash), so that a flood of it is shed rather than left to queue until
 * every caller times out.
 */
export class Bulkhead {
  private running = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(
    private readonly concurrency: number,
    private readonly maxWaiting: number,
  ) {}

  async run<T>(task: () => Promise<T>, refusal: () => Error): Promise<T> {
    if (this.running < this.concurrency) this.running++;
    else if (this.waiting.length >= this.maxWaiting) throw refusal();
    // A finished task hands its turn to the first waiter, so `running` counts it already.
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      return await task();
    } finally {
      const next = this.waiting.shift();
      if (next !== undefined) next();
      else this.running--;
    }
  }

  /** Tasks running and waiting, for a metric or a test. */
  get load(): { running: number; waiting: number } {
    return { running: this.running, waiting: this.waiting.length };
  }
}
