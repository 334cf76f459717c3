/** A background task that runs now and then again `intervalMs` after each run ends. */
export interface Periodic {
  stop(): void;
}

/**
 * Runs `task` at once and then repeatedly, never two runs at a time: the next run is scheduled
 * only when the previous one settled. A failing run is passed to `onError` and does not stop
 * the loop. The timer does not keep the process alive.
 */
export function runPeriodically(task: () => Promise<void>, intervalMs: number, onError: (error: unknown) => void): Periodic {
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const tick = () => {
    task()
      .catch(onError)
      .finally(() => {
        if (stopped) return;
        timer = setTimeout(tick, intervalMs);
        timer.unref();
      });
  };
  tick();
  return {
    stop: () => {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
