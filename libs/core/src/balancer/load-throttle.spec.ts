import { describe, expect, it } from 'vitest';
import {
  DEFAULT_LOAD_THROTTLE_SETTINGS,
  IDLE_WINDOWS,
  INITIAL_LOAD_THROTTLE_STATE,
  RECENT_IDLE_WINDOWS,
  type LoadThrottleState,
  MAX_PAUSE_MS,
  PAUSE_STEP_MS,
  MIN_CLONE_SHARE,
  THROTTLED_CLONE_BATCH_DOCUMENTS,
  clonePacingOf,
  isThrottled,
  migrationGate,
  observeForegroundLoad,
} from './load-throttle.js';

const settings = DEFAULT_LOAD_THROTTLE_SETTINGS;
const idle = (p99Ms: number, writes = 100) => ({ writes, p99Ms, inFlight: 0, migrating: false });
const migrating = (p99Ms: number, writes = 100, peakMigrations = 1) => ({ writes, p99Ms, inFlight: 0, migrating: true, peakMigrations });
const observe = (state: LoadThrottleState, ...windows: Array<ReturnType<typeof idle> | ReturnType<typeof migrating>>) =>
  windows.reduce((s, w) => observeForegroundLoad(s, w, settings), state);

describe('the load throttle', () => {
  it('learns the idle p99 from windows without migrations, as medians of the last ones', () => {
    const state = observe(INITIAL_LOAD_THROTTLE_STATE, idle(10), idle(8), idle(12));
    expect(state.idleP99Ms).toBe(10);
    expect(state.pauseMs).toBe(0);
    // A burst and a lucky window move it no more than any other window.
    expect(observe(state, idle(200), idle(1)).idleP99Ms).toBe(10);
    // Only the last IDLE_WINDOWS are kept.
    const windows = (n: number, p99Ms: number) => Array.from({ length: n }, () => idle(p99Ms));
    const loaded = observe(INITIAL_LOAD_THROTTLE_STATE, ...windows(IDLE_WINDOWS, 100));
    expect(observe(loaded, idle(10)).idleWindows).toHaveLength(IDLE_WINDOWS);
    // A bulk load's 100 ms windows, then its end: the target follows once most recent windows are lighter.
    const lighter = Math.ceil(RECENT_IDLE_WINDOWS / 2);
    expect(observe(loaded, ...windows(lighter - 1, 10)).idleP99Ms).toBe(100);
    expect(observe(loaded, ...windows(lighter, 10)).idleP99Ms).toBe(10);
    // A heavier load raises it only once it fills most of the long window.
    const calm = observe(INITIAL_LOAD_THROTTLE_STATE, ...windows(IDLE_WINDOWS, 10));
    const heavier = Math.ceil(IDLE_WINDOWS / 2);
    expect(observe(calm, ...windows(heavier - 1, 100)).idleP99Ms).toBe(10);
    expect(observe(calm, ...windows(heavier, 100)).idleP99Ms).toBe(100);
  });

  it('ignores windows with too few writes to have a p99', () => {
    expect(observe(INITIAL_LOAD_THROTTLE_STATE, idle(10, settings.minWrites - 1))).toBe(INITIAL_LOAD_THROTTLE_STATE);
    const throttled = observe(INITIAL_LOAD_THROTTLE_STATE, idle(10), migrating(50));
    expect(observe(throttled, migrating(1, settings.minWrites - 1))).toBe(throttled);
  });

  it('ends any throttling at once when a window has no write at all: nothing to protect', () => {
    const throttled = observe(INITIAL_LOAD_THROTTLE_STATE, idle(10), migrating(50), migrating(50));
    expect(throttled).toMatchObject({ cloneShare: 0.25, pauseMs: 2 * PAUSE_STEP_MS });
    expect(observeForegroundLoad(throttled, { writes: 0, p99Ms: null, inFlight: 0, migrating: true }, settings)).toMatchObject({
      pauseMs: 0,
      cloneShare: 1,
      reason: null,
      idleP99Ms: 10,
    });
  });

  it('counts writes that all stall during a migration (none completed, some running) as over the target', () => {
    const learned = observe(INITIAL_LOAD_THROTTLE_STATE, idle(10));
    const stalled = observeForegroundLoad(learned, { writes: 0, p99Ms: null, inFlight: 4, migrating: true }, settings);
    expect(stalled).toMatchObject({ pauseMs: PAUSE_STEP_MS, cloneShare: 0.5, reason: '4 writes stalled while a migration ran' });
    expect(observeForegroundLoad(stalled, { writes: 0, p99Ms: null, inFlight: 4, migrating: true }, settings)).toMatchObject({
      pauseMs: 2 * PAUSE_STEP_MS,
      cloneShare: 0.25,
    });
    // Without a migration running, a stall is not the balancer's doing.
    expect(observeForegroundLoad(learned, { writes: 0, p99Ms: null, inFlight: 4, migrating: false }, settings)).toBe(learned);
  });

  it('runs at full speed while migrations keep the p99 within the target multiple of idle', () => {
    const state = observe(INITIAL_LOAD_THROTTLE_STATE, idle(10), migrating(19), migrating(20));
    expect(state).toMatchObject({ pauseMs: 0, cloneShare: 1, reason: null, migratingP99Ms: 20 });
    expect(isThrottled(state)).toBe(false);
  });

  it('while over the target, doubles the pause up to its cap and halves the clone share down to its floor', () => {
    let state = observe(INITIAL_LOAD_THROTTLE_STATE, idle(10), migrating(25));
    expect(state).toMatchObject({ pauseMs: PAUSE_STEP_MS, cloneShare: 0.5, reason: 'write p99 25 ms over 2 x its idle 10 ms' });
    expect(isThrottled(state)).toBe(true);
    state = observe(state, migrating(30));
    expect(state).toMatchObject({ pauseMs: 2 * PAUSE_STEP_MS, cloneShare: 0.25 });
    state = observe(state, migrating(30));
    expect(state).toMatchObject({ pauseMs: 4 * PAUSE_STEP_MS, cloneShare: MIN_CLONE_SHARE });
    for (let i = 0; i < 20; i++) state = observe(state, migrating(40));
    expect(state).toMatchObject({ pauseMs: MAX_PAUSE_MS, cloneShare: MIN_CLONE_SHARE });
  });

  it('under the target, shrinks the pause a step and regains a tenth of the share per window', () => {
    let state = observe(INITIAL_LOAD_THROTTLE_STATE, idle(10), ...Array.from({ length: 3 }, () => migrating(40)));
    expect(state).toMatchObject({ cloneShare: MIN_CLONE_SHARE, pauseMs: 4 * PAUSE_STEP_MS });
    state = observe(state, migrating(15));
    expect(state).toMatchObject({ cloneShare: 0.3, pauseMs: 3 * PAUSE_STEP_MS });
    expect(state.reason).not.toBeNull();
    // Back to full speed over eight windows, not at once; the pause went after four.
    state = observe(state, ...Array.from({ length: 6 }, () => migrating(15)));
    expect(state).toMatchObject({ cloneShare: 0.9, pauseMs: 0 });
    expect(isThrottled(state)).toBe(true);
    // Over again at 0.9: half of it, not the floor.
    expect(observe(state, migrating(25)).cloneShare).toBe(0.45);
    state = observe(state, migrating(15));
    expect(state).toMatchObject({ cloneShare: 1, pauseMs: 0, reason: null });
    expect(isThrottled(state)).toBe(false);
  });

  it('starts migrations one at a time once writes run, and lets one more run after each window of that many within the target', () => {
    // An idle cluster: no limit.
    expect(INITIAL_LOAD_THROTTLE_STATE.concurrency).toBeNull();
    let state = observe(INITIAL_LOAD_THROTTLE_STATE, idle(10));
    expect(state.concurrency).toBe(1);
    state = observe(state, migrating(15, 100, 1));
    expect(state.concurrency).toBe(2);
    // A window that ran fewer than the limit says nothing about one more.
    state = observe(state, migrating(15, 100, 1));
    expect(state.concurrency).toBe(2);
    state = observe(state, migrating(15, 100, 2), migrating(15, 100, 3));
    expect(state.concurrency).toBe(4);
    // Over the target: back to one, paused; the limit grows again only once the pause is gone.
    state = observe(state, migrating(25, 100, 4), migrating(25, 100, 1));
    expect(state).toMatchObject({ concurrency: 1, pauseMs: 2 * PAUSE_STEP_MS });
    state = observe(state, migrating(15, 100, 1));
    expect(state).toMatchObject({ concurrency: 1, pauseMs: PAUSE_STEP_MS });
    state = observe(state, migrating(15, 100, 1));
    expect(state).toMatchObject({ concurrency: 2, pauseMs: 0 });
    // No write at all: no limit.
    expect(observeForegroundLoad(state, { writes: 0, p99Ms: null, inFlight: 0, migrating: true }, settings).concurrency).toBeNull();
  });

  it('does not throttle on latency before it knows the idle p99, or with a multiple of 0', () => {
    expect(observe(INITIAL_LOAD_THROTTLE_STATE, migrating(500)).pauseMs).toBe(0);
    const off = { ...settings, targetLatencyMultiple: 0 };
    const state = [idle(10), migrating(500)].reduce((s, w) => observeForegroundLoad(s, w, off), INITIAL_LOAD_THROTTLE_STATE);
    expect(state.pauseMs).toBe(0);
  });
});

describe('the clone pacing', () => {
  const batchDocuments = THROTTLED_CLONE_BATCH_DOCUMENTS;

  it('leaves a clone at full speed alone, and paces one at a share of its speed with a wait after each batch', () => {
    expect(clonePacingOf(INITIAL_LOAD_THROTTLE_STATE)).toBeUndefined();
    expect(clonePacingOf({ ...INITIAL_LOAD_THROTTLE_STATE, cloneShare: 0.5 })).toEqual({ batchDocuments, waitRatio: 1 });
    expect(clonePacingOf({ ...INITIAL_LOAD_THROTTLE_STATE, cloneShare: 0.8 })).toEqual({ batchDocuments, waitRatio: 0.25 });
    expect(clonePacingOf({ ...INITIAL_LOAD_THROTTLE_STATE, cloneShare: MIN_CLONE_SHARE })).toEqual({ batchDocuments, waitRatio: 4 });
  });

  it('returns to full speed at once when a window has no write at all', () => {
    const throttled = observe(INITIAL_LOAD_THROTTLE_STATE, idle(10), migrating(50));
    expect(observeForegroundLoad(throttled, { writes: 0, p99Ms: null, inFlight: 0, migrating: true }, settings).cloneShare).toBe(1);
  });
});

describe('the migration gate', () => {
  const fullSpeed = INITIAL_LOAD_THROTTLE_STATE;
  const paused: LoadThrottleState = { ...fullSpeed, idleP99Ms: 10, pauseMs: 500, reason: 'write p99 high' };

  it('lets every migration start at once at full speed, however many run', () => {
    expect(migrationGate(fullSpeed, { inFlight: 3, lastStart: { atMs: 990, bytes: 1e9 }, lastEndMs: 999 }, settings, 1000)).toEqual({
      waitMs: 0,
      why: null,
    });
  });

  it('while throttled, runs one migration at a time, each the pause after the last one ended', () => {
    expect(migrationGate(paused, { inFlight: 1, lastStart: null, lastEndMs: null }, settings, 1000).waitMs).toBe(Number.POSITIVE_INFINITY);
    const gate = migrationGate(paused, { inFlight: 0, lastStart: null, lastEndMs: 800 }, settings, 1000);
    expect(gate).toEqual({ waitMs: 300, why: 'paused 500 ms between migrations: write p99 high' });
    expect(migrationGate(paused, { inFlight: 0, lastStart: null, lastEndMs: 400 }, settings, 1000).waitMs).toBe(0);
    // None ended yet (the pause came from other migrations' windows): nothing to space the first from.
    expect(migrationGate(paused, { inFlight: 0, lastStart: null, lastEndMs: null }, settings, 1000).waitMs).toBe(0);
  });

  it('holds a migration while the migrations in flight are at the concurrency limit', () => {
    const limited: LoadThrottleState = { ...fullSpeed, idleP99Ms: 10, concurrency: 2 };
    expect(migrationGate(limited, { inFlight: 1, lastStart: null, lastEndMs: null }, settings, 1000).waitMs).toBe(0);
    expect(migrationGate(limited, { inFlight: 2, lastStart: null, lastEndMs: null }, settings, 1000)).toEqual({
      waitMs: Number.POSITIVE_INFINITY,
      why: '2 migration(s) at a time while writes run, one more after each window within the target',
    });
  });

  it('keeps all migrations together under the byte rate', () => {
    const capped = { ...settings, maxBytesPerSecond: 1_000_000 };
    const pacing = { inFlight: 1, lastStart: { atMs: 1000, bytes: 2_000_000 }, lastEndMs: null };
    expect(migrationGate(fullSpeed, pacing, capped, 1500)).toEqual({ waitMs: 1500, why: 'at most 1000000 bytes per second' });
    expect(migrationGate(fullSpeed, pacing, capped, 3000).waitMs).toBe(0);
  });
});
