/**
 * The continuous scheduler's throttle: migrations are paced by the foreground write latency the
 * routers see and by a byte rate, instead of MongoDB's fixed `balancerMigrationsThrottlingMs`.
 * Balancing runs at full speed on an idle cluster and backs off while it hurts the writes.
 *
 * - The routers report, per window, how many writes they completed and their p99.
 * - A window in which no migration ran teaches the idle p99 (a moving average that follows a
 *   lower p99 faster than a higher one).
 * - A window in which one ran compares its p99 with `targetLatencyMultiple` × the idle p99. Over
 *   it, the pause before each migration doubles (from `PAUSE_STEP_MS` up to `MAX_PAUSE_MS`) and
 *   migrations go one at a time; at or under it, the pause shrinks by a step (additive increase,
 *   multiplicative decrease of the rate, as TCP's congestion control).
 * - While writes run, migrations in flight at once are limited too (`concurrency`): the limit
 *   starts at one once a window without migrations has writes, grows by one after each window
 *   that ran that many and stayed within the target, and drops to one with any pause. This is
 *   how a donor serving several migrations (parallel donors) stays under the load target.
 * - A window with no write completed and none running ends any pause and any limit: an idle
 *   cluster balances at full speed. With none completed but some running while a migration ran,
 *   the writes are stalled: that counts as over the target.
 * - With `maxBytesPerSecond`, a migration of B bytes keeps the next one from starting until
 *   B ÷ rate after it started.
 */

/** The routers' foreground writes over one report window, summed over routers. */
export interface ForegroundWriteLoad {
  /** Writes the routers completed in the window. */
  readonly writes: number;
  /** The highest p99 a router reported for the window, in ms; null with no writes. */
  readonly p99Ms: number | null;
  /** Writes still running at the window's end. */
  readonly inFlight: number;
  /** Whether a migration (the balancer's or any other) ran at any time during the window. */
  readonly migrating: boolean;
  /** The most balancer migrations in flight at once during the window (default: 1 when migrating). */
  readonly peakMigrations?: number;
}

/** The throttle's settings. */
export interface LoadThrottleSettings {
  /** Throttle while the write p99 is above this multiple of its idle value (0: never on latency). */
  readonly targetLatencyMultiple: number;
  /** All migrations together move at most this many bytes per second (0: no limit). */
  readonly maxBytesPerSecond: number;
  /** A window with fewer writes says nothing about latency. */
  readonly minWrites: number;
}

/** The defaults: throttle past 2 x the idle p99, no byte rate, a p99 from 20 writes. */
export const DEFAULT_LOAD_THROTTLE_SETTINGS: LoadThrottleSettings = Object.freeze({
  targetLatencyMultiple: 2,
  maxBytesPerSecond: 0,
  minWrites: 20,
});

/** The first pause once throttled, and the step by which a pause shrinks. */
export const PAUSE_STEP_MS = 250;
/** The longest pause between two migrations. */
export const MAX_PAUSE_MS = 8_000;
/**
 * Weights of a new idle window in the idle p99's moving average: a window under it weighs more
 * than one over it. A lower idle p99 means the load got lighter (a bulk load ended), and the
 * target must follow at once or it lets migrations hurt the lighter load; a higher one is more
 * often a burst or a checkpoint, which must not loosen the target.
 */
const IDLE_WEIGHT_DOWN = 0.5;
const IDLE_WEIGHT_UP = 0.1;

/** What the throttle knows. */
export interface LoadThrottleState {
  /** The write p99 while no migration ran (moving average), in ms; null until learned. */
  readonly idleP99Ms: number | null;
  /** The last window's write p99 with a migration running, in ms; null: none yet. */
  readonly migratingP99Ms: number | null;
  /** Pause before each migration; 0: full speed. */
  readonly pauseMs: number;
  /** Why migrations are paused, when they are. */
  readonly reason: string | null;
  /** The most migrations in flight at once while writes run; null: no limit. */
  readonly concurrency: number | null;
}

/** Nothing learned yet: full speed. */
export const INITIAL_LOAD_THROTTLE_STATE: LoadThrottleState = Object.freeze({
  idleP99Ms: null,
  migratingP99Ms: null,
  pauseMs: 0,
  reason: null,
  concurrency: null,
});

/** The state after one more report window. */
export function observeForegroundLoad(
  state: LoadThrottleState,
  load: ForegroundWriteLoad,
  settings: LoadThrottleSettings,
): LoadThrottleState {
  if (load.writes === 0 && load.inFlight === 0)
    return state.pauseMs === 0 && state.concurrency === null ? state : { ...state, pauseMs: 0, reason: null, concurrency: null };
  if (load.writes === 0 && load.migrating && state.idleP99Ms !== null && settings.targetLatencyMultiple > 0)
    return slowDown(state, `${load.inFlight} writes stalled while a migration ran`);
  if (load.p99Ms === null || load.writes < settings.minWrites) return state;
  if (!load.migrating) {
    const weight = state.idleP99Ms === null ? 1 : load.p99Ms < state.idleP99Ms ? IDLE_WEIGHT_DOWN : IDLE_WEIGHT_UP;
    const idleP99Ms = (1 - weight) * (state.idleP99Ms ?? 0) + weight * load.p99Ms;
    // Writes run: the next migrations start one at a time and grow from there.
    return { ...state, idleP99Ms, concurrency: state.concurrency ?? 1 };
  }
  if (state.idleP99Ms === null || settings.targetLatencyMultiple <= 0) return { ...state, migratingP99Ms: load.p99Ms };
  const target = settings.targetLatencyMultiple * state.idleP99Ms;
  if (load.p99Ms > target) {
    const reason = `write p99 ${Math.round(load.p99Ms)} ms over ${settings.targetLatencyMultiple} x its idle ${Math.round(state.idleP99Ms)} ms`;
    return slowDown({ ...state, migratingP99Ms: load.p99Ms }, reason);
  }
  const pauseMs = Math.max(0, state.pauseMs - PAUSE_STEP_MS);
  // One more at once, once this many ran together within the target.
  const tested = state.concurrency !== null && (load.peakMigrations ?? 1) >= state.concurrency;
  const concurrency = pauseMs === 0 && tested ? state.concurrency! + 1 : state.concurrency;
  return { ...state, migratingP99Ms: load.p99Ms, pauseMs, reason: pauseMs === 0 ? null : state.reason, concurrency };
}

/** Documents per clone batch while throttled: one batch is a short burst, not seconds of copying. */
export const THROTTLED_CLONE_BATCH_DOCUMENTS = 500;
/** The longest wait after a clone batch, in multiples of the time the batch took. */
export const MAX_CLONE_WAIT_RATIO = 4;

/**
 * How a migration started now clones (libs/protocol's ClonePacing): none at full speed; while
 * throttled, batches of `THROTTLED_CLONE_BATCH_DOCUMENTS`, and after each the recipient waits
 * `waitRatio` times as long as the batch took: 1 at the pause's first step, 2 at the second, up
 * to `MAX_CLONE_WAIT_RATIO`. Small batches keep each burst of copying short, which is what the
 * writes' p99 sees; the wait spreads the bursts, at a share of the clone's speed on this
 * cluster whatever the documents' size. Past that, the pause between migrations backs off.
 */
export function clonePacingOf(state: LoadThrottleState): { batchDocuments: number; waitRatio: number } | undefined {
  if (state.pauseMs === 0) return undefined;
  return { batchDocuments: THROTTLED_CLONE_BATCH_DOCUMENTS, waitRatio: Math.min(MAX_CLONE_WAIT_RATIO, state.pauseMs / PAUSE_STEP_MS) };
}

/** The pause doubled (or first set), up to its cap, with why; one migration at a time. */
function slowDown(state: LoadThrottleState, reason: string): LoadThrottleState {
  return { ...state, pauseMs: Math.min(MAX_PAUSE_MS, state.pauseMs === 0 ? PAUSE_STEP_MS : state.pauseMs * 2), reason, concurrency: 1 };
}

/** What the scheduler knows of the migrations when it wants to start one. */
export interface MigrationPacing {
  /** Balancer migrations in flight now. */
  readonly inFlight: number;
  /** When the last migration started, and how many bytes it was to move (null: none yet). */
  readonly lastStart: { readonly atMs: number; readonly bytes: number } | null;
  /** When the last migration ended (null: none yet). */
  readonly lastEndMs: number | null;
}

/** Whether a migration may start now: `waitMs` 0, or how long to wait and why. */
export interface MigrationGate {
  readonly waitMs: number;
  readonly why: string | null;
}

/**
 * Whether a migration may start at `nowMs`. Throttled on latency, one migration at a time, each
 * `pauseMs` after the last one ended (the first at once: there is nothing to space it from);
 * else at most `concurrency` at once; with a byte rate, the last one's bytes ÷ rate after it
 * started.
 */
export function migrationGate(
  state: LoadThrottleState,
  pacing: MigrationPacing,
  settings: LoadThrottleSettings,
  nowMs: number,
): MigrationGate {
  let waitMs = 0;
  let why: string | null = null;
  if (state.pauseMs > 0) {
    if (pacing.inFlight > 0) return { waitMs: Number.POSITIVE_INFINITY, why: `one migration at a time: ${state.reason}` };
    const until = pacing.lastEndMs === null ? nowMs : pacing.lastEndMs + state.pauseMs;
    if (until > nowMs) {
      waitMs = until - nowMs;
      why = `paused ${state.pauseMs} ms between migrations: ${state.reason}`;
    }
  } else if (state.concurrency !== null && pacing.inFlight >= state.concurrency) {
    return {
      waitMs: Number.POSITIVE_INFINITY,
      why: `${state.concurrency} migration(s) at a time while writes run, one more after each window within the target`,
    };
  }
  if (settings.maxBytesPerSecond > 0 && pacing.lastStart !== null) {
    const until = pacing.lastStart.atMs + (pacing.lastStart.bytes / settings.maxBytesPerSecond) * 1000;
    if (until - nowMs > waitMs) {
      waitMs = until - nowMs;
      why = `at most ${settings.maxBytesPerSecond} bytes per second`;
    }
  }
  return { waitMs, why };
}
