/**
 * One way of inserting (through the router, raw `pg`, through the floor), run from `concurrency`
 * loops while started, each loop inserting a batch after the other with keys that never repeat.
 */
export class InsertLoad {
  private running = false;
  private loops: Promise<unknown> = Promise.resolve();
  private next = 0;
  /** Documents whose insert has completed since the load was made. */
  completed = 0;

  constructor(
    private readonly batch: number,
    private readonly concurrency: number,
    private readonly insert: (first: number, count: number) => Promise<void>,
  ) {}

  start(): void {
    this.running = true;
    this.loops = Promise.all(
      Array.from({ length: this.concurrency }, async () => {
        while (this.running) {
          const first = this.next;
          this.next += this.batch;
          await this.insert(first, this.batch);
          this.completed += this.batch;
        }
      }),
    );
  }

  /** Starts no more inserts; resolves once those under way have completed (rejects if one failed). */
  async stop(): Promise<void> {
    this.running = false;
    await this.loops;
  }

  /**
   * Runs the load for `seconds`: answers the documents inserted and the time from the start until
   * the last insert under way at the end completed.
   */
  async runFor(seconds: number): Promise<{ documents: number; seconds: number }> {
    const before = this.completed;
    const started = performance.now();
    this.start();
    await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
    await this.stop();
    return { documents: this.completed - before, seconds: (performance.now() - started) / 1000 };
  }
}
