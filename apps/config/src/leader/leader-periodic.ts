import { type Periodic, runPeriodically } from '@tessera/platform';

/**
 * The loop of a leader-only periodic job: started when this config process is elected (a loop
 * of an earlier term stopped first), stopped when it steps down and at shutdown, so a job never
 * runs twice at once nor outlives its leadership.
 */
export class LeaderPeriodic {
  private loop: Periodic | undefined;

  start(task: () => Promise<void>, intervalMs: number, onError: (error: unknown) => void): void {
    this.loop?.stop();
    this.loop = runPeriodically(task, intervalMs, onError);
  }

  stop(): void {
    this.loop?.stop();
    this.loop = undefined;
  }
}
