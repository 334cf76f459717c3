import { percentile } from '../percentile.js';

/**
 * The continuous scheduler's throttle: migrations are paced by the foreground write latency the
 * routers see and by a byte rate, instead of MongoDB's fixed `balancerMigrationsThrottlingMs`.
 * Balancing runs at full speed on an idle cluster and backs off while it hurts the writes.
 *
 * - The routers report, per window, how many writes they completed and their p99.
 * - A window in which no migration ran teaches the idle p99 (medians of the last such windows'
 *   p99s, see `IDLE_WINDOWS`).
 * - A window in which one ran compares its p99 with `targetLatencyMultiple` × the idle p99. Over
 *   it, migrations go one at a time, the pause between two of them doubles (from
 *   `PAUSE_STEP_MS` up to `MAX_PAUSE_MS`), and the share of its speed a clone runs at halves,
 *   down to `MIN_CLONE_SHARE`. At or under it, the pause shrinks by a step and the share grows
 *   by `CLONE_SHARE_STEP` (additive increase, multiplicative decrease, as TCP's congestion
 *   control). The pause spaces what every migration costs whatever its size (the critical
 *   section, the commit, the routers' refresh: most of a small chunk's cost); the share slows
 *   the clone, most of a large one's. The share climbs back to full speed over several windows
 *   rather than at once: a clone let loose at full speed from half of it hurt the writes again
 *   in its first window, and the throttle swung between the two instead of settling at the
 *   share the writes can bear.
 * - While writes run, migrations in flight at once are limited too (`concurrency`): the limit
 *   starts at one once a window without migrations has writes, grows by one after each window
 *   that ran that many and stayed within the target, and drops to one at each slow-down. This is
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
 * The idle p99 is the lower of two medians of idle windows' p99s: of the last `IDLE_WINDOWS`,
 * and of the last `RECENT_IDLE_WINDOWS`. One window's p99 comes from a few hundred writes, so it
 * is noisy both ways: a moving average that followed lower windows fast settled on the lucky
 * ones and set the target under what the load gets with nothing migrating, and the throttle
 * held migrations for it. A median ignores a burst and a lucky window alike. The short one
 * follows a load that got lighter (a bulk load that ended) within 3 windows, or the target would
 * let migrations hurt the lighter load; the long one lets a heavier load raise the target only
 * after 8 windows, so that a burst or a checkpoint does not loosen it.
 */
export const IDLE_WINDOWS = 15;
/** The short median's windows (see `IDLE_WINDOWS`). */
export const RECENT_IDLE_WINDOWS = 5;

/** What the throttle knows. */
export interface LoadThrottleState {
  /** The write p99 while no migration ran (from `idleWindows`, see `IDLE_WINDOWS`), in ms; null until learned. */
  readonly idleP99Ms: number | null;
  /** The last `IDLE_WINDOWS` idle windows' p99s, oldest first. */
  readonly idleWindows: readonly number[];
  /** The last window's write p99 with a migration running, in ms; null: none yet. */
  readonly migratingP99Ms: number | null;
  /** Pause before each migration; 0: none. */
  readonly pauseMs: number;
  /** The share of its speed a clone runs at (`clonePacingOf`); 1: full speed. */
  readonly cloneShare: number;
  /** Why migrations are throttled (paused or paced), when they are. */
  readonly reason: string | null;
  /** The most migrations in flight at once while writes run; null: no limit. */
  readonly concurrency: number | null;
}

/** Nothing learned yet: full speed. */
export const INITIAL_LOAD_THROTTLE_STATE: LoadThrottleState = Object.freeze({
  idleP99Ms: null,
  idleWindows: [],
  migratingP99Ms: null,
  pauseMs: 0,
  cloneShare: 1,
  reason: null,
  concurrency: null,
});

/** Whether migrations are throttled: paused between them, or cloned at a share of their speed. */
export function isThrottled(state: LoadThrottleState): boolean {
  return state.pauseMs > 0 || state.cloneShare < 1;
}

/** The state after one more report window. */
export function observeForegroundLoad(
  state: LoadThrottleState,
  load: ForegroundWriteLoad,
  settings: LoadThrottleSettings,
): LoadThrottleState {
  if (load.writes === 0 && load.inFlight === 0)
    return !isThrottled(state) && state.concurrency === null
      ? state
      : { ...state, pauseMs: 0, cloneShare: 1, reason: null, concurrency: null };
  if (load.writes === 0 && load.migrating && state.idleP99Ms !== null && settings.targetLatencyMultiple > 0)
    return slowDown(state, `${load.inFlight} writes stalled while a migration ran`);
  if (load.p99Ms === null || load.writes < settings.minWrites) return state;
  if (!load.migrating) {
    const idleWindows = [...state.idleWindows, load.p99Ms].slice(-IDLE_WINDOWS);
    const idleP99Ms = Math.min(median(idleWindows), median(idleWindows.slice(-RECENT_IDLE_WINDOWS)));
    // Writes run: the next migrations start one at a time and grow from there.
    return { ...state, idleWindows, idleP99Ms, concurrency: state.concurrency ?? 1 };
  }
  if (state.idleP99Ms === null || settings.targetLatencyMultiple <= 0) return { ...state, migratingP99Ms: load.p99Ms };
  const target = settings.targetLatencyMultiple * state.idleP99Ms;
  if (load.p99Ms > target) {
    const reason = `write p99 ${Math.round(load.p99Ms)} ms over ${settings.targetLatencyMultiple} x its idle ${Math.round(state.idleP99Ms)} ms`;
    return slowDown({ ...state, migratingP99Ms: load.p99Ms }, reason);
  }
  const pauseMs = Math.max(0, state.pauseMs - PAUSE_STEP_MS);
  const cloneShare = Math.min(1, roundedShare(state.cloneShare + CLONE_SHARE_STEP));
  // One more at once, once this many ran together within the target.
  const tested = state.concurrency !== null && (load.peakMigrations ?? 1) >= state.concurrency;
  const concurrency = pauseMs === 0 && tested ? state.concurrency! + 1 : state.concurrency;
  const reason = pauseMs === 0 && cloneShare === 1 ? null : state.reason;
  return { ...state, migratingP99Ms: load.p99Ms, pauseMs, cloneShare, reason, concurrency };
}

/** Documents per clone batch while throttled: one batch is a short burst, not seconds of copying. */
export const THROTTLED_CLONE_BATCH_DOCUMENTS = 100;
/** The smallest share of its speed a clone runs at: a wait of 4 times each batch's time. */
export const MIN_CLONE_SHARE = 0.2;
/** How much the clone share grows after each window within the target. */
export const CLONE_SHARE_STEP = 0.1;

/**
 * How a migration clones now (libs/protocol's ClonePacing): none at full speed; while its share
 * is under 1, batches of `THROTTLED_CLONE_BATCH_DOCUMENTS`, and after each the recipient waits
 * `waitRatio` = 1 ÷ share − 1 times as long as the batch took (1 at half speed, 4 at the
 * smallest share). Small batches keep each burst of copying short, which is what the writes'
 * p99 sees; the wait spreads the bursts, at that share of the clone's speed on this cluster
 * whatever the documents' size.
 */
export function clonePacingOf(state: LoadThrottleState): { batchDocuments: number; waitRatio: number } | undefined {
  if (state.cloneShare >= 1) return undefined;
  return { batchDocuments: THROTTLED_CLONE_BATCH_DOCUMENTS, waitRatio: Math.round((1 / state.cloneShare - 1) * 100) / 100 };
}

/** The pause doubled (or first set) up to its cap and the clone share halved down to its floor, with why; one migration at a time. */
function slowDown(state: LoadThrottleState, reason: string): LoadThrottleState {
  const pauseMs = Math.min(MAX_PAUSE_MS, state.pauseMs === 0 ? PAUSE_STEP_MS : state.pauseMs * 2);
  const cloneShare = Math.max(MIN_CLONE_SHARE, roundedShare(state.cloneShare / 2));
  return { ...state, pauseMs, cloneShare, reason, concurrency: 1 };
}

function median(values: readonly number[]): number {
  return percentile(
    [...values].sort((a, b) => a - b),
    50,
  );
}

/** Shares kept to hundredths, so that steps of a tenth add up to exactly 1. */
function roundedShare(share: number): number {
  return Math.round(share * 100) / 100;
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
 * Whether a migration may start at `nowMs`. Paused, one migration at a time, each `pauseMs`
 * after the last one ended (the first at once: there is nothing to space it from); else at most
 * `concurrency` at once; with a byte rate, the last one's bytes ÷ rate after it started.
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
