import { type Periodic, runPeriodically } from '@tessera/platform';
import type { LeaderOnlyService } from './leader.service.js';

/**
 * A leader-only periodic job, as the leader service runs it: its loop starts when this config
 * process is elected (a loop of an earlier term stopped first) and stops when it steps down and
 * at shutdown, so a job never runs twice at once nor outlives its leadership. Its owner
 * registers it with the leader service and calls `stop` at shutdown.
 */
export class LeaderPeriodic implements LeaderOnlyService {
  private loop: Periodic | undefined;

  constructor(
    readonly name: string,
    private readonly task: () => Promise<void>,
    private readonly intervalMs: number,
    private readonly onError: (error: unknown) => void,
  ) {}

  async startAsLeader(): Promise<void> {
    this.loop?.stop();
    this.loop = runPeriodically(this.task, this.intervalMs, this.onError);
  }

  async stopAsLeader(): Promise<void> {
    this.stop();
  }

  stop(): void {
    this.loop?.stop();
    this.loop = undefined;
  }
}
